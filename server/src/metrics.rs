//! The server's metrics (the families are listed in docs/operations.md, "Metrics"): one
//! [`Metrics`] registry per [`Server`](crate::Server) (no global recorder: several servers run
//! in one test process), served by the admin endpoint's `GET /metrics` in the Prometheus text
//! format (version 0.0.4), every family with its `HELP`.
//!
//! Who records what, so the sans-IO core never touches a metric:
//!
//! | recorded by | families |
//! |---|---|
//! | the game task, from the core's [`Observation`]s | `gatehouse_transition_phase_duration_seconds{phase}`, `gatehouse_transition_duration_seconds{outcome}`, `gatehouse_client_ready_seconds`, `gatehouse_spawn_queue_wait_seconds`, `gatehouse_transitions_ended_total{outcome}`, `gatehouse_spawn_refusals_total{cause}`, `gatehouse_logins_refused_total{reason="server_full"}` |
//! | the game task, from its own wakes | `gatehouse_game_loop_lag_seconds` |
//! | the net side | `gatehouse_connection_closes_total{code,side}`, `gatehouse_logins_refused_total{reason}` (token, version, hello, draining), the tickets refused at the `Hello` (added to the core's `gatehouse_tickets_refused_total`), `gatehouse_pending_connections`, and quinn's path statistics summed over every connection: `gatehouse_quic_rtt_seconds`, `gatehouse_quic_sent_packets_total`, `gatehouse_quic_lost_packets_total`, `gatehouse_quic_lost_bytes_total`, `gatehouse_quic_congestion_events_total` |
//! | the store worker | `gatehouse_store_save_seconds`, `gatehouse_store_load_seconds`, `gatehouse_saves_total{outcome}` |
//! | the orchestrator's SDK task (`agones` feature; the family is there, at 0, without it) | `gatehouse_fleet_sdk_errors_total{call}` |
//! | a sample of the core taken at scrape time | `gatehouse_players`, `gatehouse_placed_players`, `gatehouse_pending_spawns`, `gatehouse_loads_in_flight`, `gatehouse_transition_phase{phase}`, `gatehouse_world_node_info{node}`, and the core's other decision counters as `gatehouse_<counter>_total` |
//! | the process, read from `/proc` at scrape time (Linux) | `process_cpu_seconds_total`, `process_resident_memory_bytes`, `process_virtual_memory_bytes`, `process_threads`, `process_start_time_seconds`, `process_open_fds`, `process_max_fds` |
//! | constant | `gatehouse_build_info{version,revision}` (always 1) |
//!
//! Durations are in seconds; every histogram has fixed buckets ([`TRANSITION_BUCKETS`],
//! [`STORE_BUCKETS`], [`LAG_BUCKETS`], [`RTT_BUCKETS`]).
//!
//! Each subsystem declares its own families ([`NetMetrics`] in `net`, [`StoreMetrics`] in
//! `store`, [`GameMetrics`] here for the game task); this module assembles them into one
//! registry, so no subsystem imports it.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use gatehouse_protocol::NodeId;

pub use crate::fleet::{FleetMetrics, SdkCall};
use crate::game::{Counters, Observation, SpawnRefusal, TransitionOutcome};
pub use crate::net::{CloseSide, NetMetrics, QuicSample, RTT_BUCKETS, close_code_name};
pub use crate::store::{STORE_BUCKETS, StoreMetrics};

/// The `Content-Type` of `GET /metrics`: the Prometheus text format, version 0.0.4.
pub const CONTENT_TYPE: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

/// Bucket bounds of the transition, phase, ready and spawn-wait histograms, seconds: from 5 ms
/// to 2 min (the settle timeout is 15 s, a transition's hard maximum a minute or two).
pub const TRANSITION_BUCKETS: [f64; 15] =
    [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 15.0, 30.0, 60.0, 120.0];

fn transition_histogram() -> Histogram {
    Histogram::new(TRANSITION_BUCKETS)
}

/// Bucket bounds of `gatehouse_game_loop_lag_seconds`, seconds: from 0.1 ms (a timer on time)
/// to 1 s (a loop stalled behind a long drain or a starved runtime).
pub const LAG_BUCKETS: [f64; 13] =
    [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0];

/// The git commit the server was built from (12 hex digits), `GATEHOUSE_REVISION` at build time
/// if set, or `unknown` (a build outside a git checkout): `gatehouse_build_info`'s `revision`
/// label (docs/operations.md, "Metrics"). Set by `server/build.rs`.
pub const REVISION: &str = env!("GATEHOUSE_REVISION");

/// The phases `gatehouse_transition_phase` lists, each with a series of its own: `None` between
/// transitions, then a transition's four phases in order, and `Moving` (a travel to another
/// server's, in place of Loading onwards: docs/spec/travel.md V1).
pub const PHASES: [&str; 6] =
    ["None", "Freezing", "Loading", "WaitingForClients", "Completing", "Moving"];

/// Every metric of one server, and the registry that encodes them. Cheap to clone: clones
/// share the metrics.
#[derive(Debug, Clone)]
pub struct Metrics {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    registry: Registry,
    game: GameMetrics,
    net: NetMetrics,
    store: StoreMetrics,
    fleet: FleetMetrics,
    sample: Arc<Mutex<CoreSample>>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// A registry with every family registered, each value at zero (every label value of the
    /// labelled counters listed from the start, so `rate()` works from the first scrape).
    pub fn new() -> Self {
        let mut registry = Registry::default();
        let logins_refused = Family::<[(&'static str, &'static str); 1], Counter>::default();
        registry.register(
            "gatehouse_logins_refused",
            "Logins refused, by reason: server_full (the player cap), or the Hello refused by the network side (unsupported_version, missing_token, malformed_token, bad_signature, expired, shutting_down, hello_expected)",
            logins_refused.clone(),
        );
        let game = GameMetrics::register(&mut registry, logins_refused.clone());
        // The tickets the net side refuses at the `Hello`, added to the core's own count.
        let tickets_refused = Counter::default();
        let net = NetMetrics::register(&mut registry, logins_refused, tickets_refused.clone());
        let store = StoreMetrics::register(&mut registry);
        let fleet = FleetMetrics::register(&mut registry);
        let build = Family::<[(&'static str, &'static str); 2], Gauge>::default();
        build
            .get_or_create(&[("version", env!("CARGO_PKG_VERSION")), ("revision", REVISION)])
            .set(1);
        registry.register(
            "gatehouse_build_info",
            "The running gatehouse-server build: its version and git revision (unknown when built outside a git checkout) as labels, the value always 1",
            build,
        );
        let sample = Arc::new(Mutex::new(CoreSample::default()));
        registry.register_collector(Box::new(CoreCollector {
            sample: sample.clone(),
            tickets_refused,
        }));
        registry.register_collector(Box::new(ProcessCollector));
        Metrics { inner: Arc::new(Inner { registry, game, net, store, fleet, sample }) }
    }

    /// What the game task records.
    pub fn game(&self) -> &GameMetrics {
        &self.inner.game
    }

    /// What the net side records.
    pub fn net(&self) -> &NetMetrics {
        &self.inner.net
    }

    /// What the store worker records.
    pub fn store(&self) -> &StoreMetrics {
        &self.inner.store
    }

    /// What the orchestrator's SDK task records.
    pub fn fleet(&self) -> &FleetMetrics {
        &self.inner.fleet
    }

    /// Keeps `sample` as the core's state to report from now on.
    pub fn set_core_sample(&self, sample: CoreSample) {
        // A poisoned lock still holds a whole sample: recover it.
        *self.inner.sample.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = sample;
    }

    /// Every family in the Prometheus text format (version 0.0.4).
    ///
    /// # Errors
    /// A formatting error from the encoder (writing to a `String` does not fail otherwise).
    pub fn encode(&self) -> Result<String, std::fmt::Error> {
        let mut text = String::new();
        prometheus_client::encoding::prometheus_text::encode(&mut text, &self.inner.registry)?;
        Ok(text)
    }
}

/// What the game task records from the core's [`Observation`]s.
#[derive(Debug, Clone)]
// prometheus-client's family types, spelled out: no type aliases, so a reader sees the real type.
#[allow(clippy::type_complexity)]
pub struct GameMetrics {
    phase: Family<[(&'static str, &'static str); 1], Histogram, fn() -> Histogram>,
    transition: Family<[(&'static str, &'static str); 1], Histogram, fn() -> Histogram>,
    client_ready: Histogram,
    spawn_wait: Histogram,
    transitions_ended: Family<[(&'static str, &'static str); 1], Counter>,
    spawn_refusals: Family<[(&'static str, &'static str); 1], Counter>,
    logins_refused: Family<[(&'static str, &'static str); 1], Counter>,
    loop_lag: Histogram,
}

impl GameMetrics {
    fn register(
        registry: &mut Registry,
        logins_refused: Family<[(&'static str, &'static str); 1], Counter>,
    ) -> Self {
        let m = GameMetrics {
            phase: Family::new_with_constructor(transition_histogram as fn() -> Histogram),
            transition: Family::new_with_constructor(transition_histogram as fn() -> Histogram),
            client_ready: transition_histogram(),
            spawn_wait: transition_histogram(),
            transitions_ended: Family::default(),
            spawn_refusals: Family::default(),
            logins_refused,
            loop_lag: Histogram::new(LAG_BUCKETS),
        };
        for phase in &PHASES[1..] {
            drop(m.phase.get_or_create(&[("phase", phase)]));
        }
        for outcome in TransitionOutcome::ALL {
            drop(m.transition.get_or_create(&[("outcome", outcome.as_str())]));
            drop(m.transitions_ended.get_or_create(&[("outcome", outcome.as_str())]));
        }
        for cause in SpawnRefusal::ALL {
            drop(m.spawn_refusals.get_or_create(&[("cause", cause.as_str())]));
        }
        drop(m.logins_refused.get_or_create(&[("reason", "server_full")]));
        registry.register(
            "gatehouse_transition_phase_duration_seconds",
            "Time a transition spent in each phase (Freezing, Loading, WaitingForClients, Completing, Moving), seconds of the core's clock; a phase cut short by a supersede or failure counts up to then",
            m.phase.clone(),
        );
        registry.register(
            "gatehouse_transition_duration_seconds",
            "Whole transitions, start to end, seconds of the core's clock, by outcome (completed, settle_timeout, superseded, failed)",
            m.transition.clone(),
        );
        registry.register(
            "gatehouse_client_ready_seconds",
            "From a client's ShowTransition to its ready report, seconds of the core's clock",
            m.client_ready.clone(),
        );
        registry.register(
            "gatehouse_spawn_queue_wait_seconds",
            "From a spawn request's queueing to its pawn spawned or teleported, seconds of the core's clock",
            m.spawn_wait.clone(),
        );
        registry.register(
            "gatehouse_transitions_ended",
            "Transitions ended, by outcome: completed (every player placed), settle_timeout (players left unplaced), superseded (by a newer travel), failed (the hard maximum)",
            m.transitions_ended.clone(),
        );
        registry.register(
            "gatehouse_spawn_refusals",
            "Spawn attempts refused and kept queued, by cause: level_not_ready (the level-ready gate), no_spawn_point (no registered spawn point; retried)",
            m.spawn_refusals.clone(),
        );
        registry.register(
            "gatehouse_game_loop_lag_seconds",
            "How late the game task woke, seconds past the earliest deadline it slept towards (the core's timer, the replication deadline, the orchestrator's health ping), at each wake once that deadline had passed: a busy or starved game loop",
            m.loop_lag.clone(),
        );
        m
    }

    /// Records that the game task woke `lag` after the earliest deadline it slept towards.
    pub fn observe_loop_lag(&self, lag: Duration) {
        self.loop_lag.observe(seconds(lag));
    }

    /// Records one observation of the core.
    pub fn observe(&self, observation: Observation) {
        match observation {
            Observation::PhaseEnded { phase, duration } => {
                self.phase.get_or_create(&[("phase", phase)]).observe(seconds(duration));
            }
            Observation::TransitionEnded { outcome, duration } => {
                let label = [("outcome", outcome.as_str())];
                self.transition.get_or_create(&label).observe(seconds(duration));
                self.transitions_ended.get_or_create(&label).inc();
            }
            Observation::ClientReady { waited } => self.client_ready.observe(seconds(waited)),
            Observation::SpawnPlaced { waited } => self.spawn_wait.observe(seconds(waited)),
            Observation::SpawnRefused { cause } => {
                self.spawn_refusals.get_or_create(&[("cause", cause.as_str())]).inc();
            }
            Observation::LoginRefused { reason } => {
                self.logins_refused.get_or_create(&[("reason", reason.as_str())]).inc();
            }
        }
    }
}

/// The core's state at one instant, taken by the game task when `/metrics` is scraped.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CoreSample {
    /// Logged-in players.
    pub players: usize,
    /// Players whose client acknowledged its pawn.
    pub placed_players: usize,
    /// Pending spawn requests.
    pub pending_spawns: usize,
    /// Streaming requests and save loads in flight.
    pub loads_in_flight: usize,
    /// The core's decision counters.
    pub counters: Counters,
    /// The transition phase, one of [`PHASES`] (empty before the first sample: every phase's
    /// series is then 0).
    pub phase: &'static str,
    /// The node whose levels are streamed now (`gatehouse_world_node_info`), if any.
    pub node: Option<NodeId>,
}

/// Encodes the last [`CoreSample`]: its gauges, and the decision counters no labelled family
/// above covers (`tickets_refused` with the net side's refusals at the `Hello` added).
#[derive(Debug)]
struct CoreCollector {
    sample: Arc<Mutex<CoreSample>>,
    /// Tickets refused by the net side at the `Hello`, before the core saw them.
    tickets_refused: Counter,
}

impl Collector for CoreCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let sample = self.sample.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
        let gauges = [
            ("gatehouse_players", "Logged-in players.", sample.players),
            (
                "gatehouse_placed_players",
                "Players whose client acknowledged possession of its pawn.",
                sample.placed_players,
            ),
            ("gatehouse_pending_spawns", "Pending spawn requests.", sample.pending_spawns),
            (
                "gatehouse_loads_in_flight",
                "Streaming requests and save loads in flight.",
                sample.loads_in_flight,
            ),
        ];
        for (name, help, value) in gauges {
            let gauge = ConstGauge::new(i64::try_from(value).unwrap_or(i64::MAX));
            let metric = encoder.encode_descriptor(name, help, None, gauge.metric_type())?;
            gauge.encode(metric)?;
        }
        let mut family = encoder.encode_descriptor(
            "gatehouse_transition_phase",
            "The transition phase now: 1 for the current one (None between transitions; Freezing, Loading, WaitingForClients, Completing, Moving), 0 for the others",
            None,
            MetricType::Gauge,
        )?;
        for phase in PHASES {
            let gauge = ConstGauge::new(i64::from(sample.phase == phase));
            gauge.encode(family.encode_family(&[("phase", phase)])?)?;
        }
        let mut family = encoder.encode_descriptor(
            "gatehouse_world_node_info",
            "The world node whose levels are streamed now, as the node label, the value always 1 (no series before the first node is streamed)",
            None,
            MetricType::Gauge,
        )?;
        if let Some(node) = &sample.node {
            let gauge = ConstGauge::new(1_i64);
            gauge.encode(family.encode_family(&[("node", node.as_str())])?)?;
        }
        for (field, help, value) in sample.counters.described() {
            if COUNTERS_IN_FAMILIES.contains(&field) {
                continue;
            }
            let name = format!("gatehouse_{field}");
            let value = if field == "tickets_refused" {
                value.saturating_add(self.tickets_refused.get())
            } else {
                value
            };
            let counter = ConstCounter::new(value);
            let metric = encoder.encode_descriptor(&name, help, None, counter.metric_type())?;
            counter.encode(metric)?;
        }
        Ok(())
    }
}

/// Decision counters reported by the labelled families instead (from observations).
const COUNTERS_IN_FAMILIES: [&str; 7] = [
    "logins_refused_full",
    "transitions_superseded",
    "transitions_completed",
    "settle_timeouts",
    "transitions_failed",
    "spawn_refusals",
    "spawn_point_retries",
];

/// Reads the process's CPU time, memory, start time and file descriptors from `/proc` at each
/// scrape (Linux; elsewhere, or if the files cannot be read, these families are left out; the
/// start time alone if `/proc/stat` cannot be read, the descriptor limit alone if unlimited).
#[derive(Debug)]
struct ProcessCollector;

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let Some(process) = ProcessStats::read() else { return Ok(()) };
        let cpu = ConstCounter::new(process.cpu_seconds);
        let metric = encoder.encode_descriptor(
            "process_cpu_seconds",
            "User and system CPU time of the process, seconds.",
            None,
            cpu.metric_type(),
        )?;
        cpu.encode(metric)?;
        let gauges = [
            (
                "process_resident_memory_bytes",
                "Resident memory of the process, bytes.",
                process.resident_bytes,
            ),
            (
                "process_virtual_memory_bytes",
                "Virtual memory of the process, bytes.",
                process.virtual_bytes,
            ),
            ("process_threads", "Threads of the process.", process.threads),
            ("process_open_fds", "Open file descriptors of the process.", process.open_fds),
        ];
        let max_fds = process.max_fds.map(|max| {
            (
                "process_max_fds",
                "The process's limit on open file descriptors (its soft RLIMIT_NOFILE).",
                max,
            )
        });
        for (name, help, value) in gauges.into_iter().chain(max_fds) {
            let gauge = ConstGauge::new(i64::try_from(value).unwrap_or(i64::MAX));
            let metric = encoder.encode_descriptor(name, help, None, gauge.metric_type())?;
            gauge.encode(metric)?;
        }
        if let Some(start) = process.start_time_seconds {
            let gauge = ConstGauge::new(start);
            let metric = encoder.encode_descriptor(
                "process_start_time_seconds",
                "When the process started, seconds since the Unix epoch.",
                None,
                gauge.metric_type(),
            )?;
            gauge.encode(metric)?;
        }
        Ok(())
    }
}

/// The Linux kernel's `USER_HZ`: `/proc` counts CPU time in these ticks per second (100 on
/// every architecture Linux runs a server on).
const USER_HZ: f64 = 100.0;

/// What `/proc/self/stat`, `/proc/self/status`, `/proc/self/limits`, `/proc/self/fd` and
/// `/proc/stat` say about the process.
#[derive(Debug, Clone, Copy, PartialEq)]
struct ProcessStats {
    cpu_seconds: f64,
    resident_bytes: u64,
    virtual_bytes: u64,
    threads: u64,
    /// Seconds since the Unix epoch (`None` without the boot time of `/proc/stat`).
    start_time_seconds: Option<f64>,
    open_fds: u64,
    /// `None` when unlimited.
    max_fds: Option<u64>,
}

impl ProcessStats {
    fn read() -> Option<ProcessStats> {
        let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
        let status = std::fs::read_to_string("/proc/self/status").ok()?;
        let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
        // One entry per descriptor (the directory's own handle is one more while it is read).
        let open_fds = std::fs::read_dir("/proc/self/fd").ok()?.count().saturating_sub(1);
        let mut stats = Self::parse(&stat, &status)?;
        stats.open_fds = u64::try_from(open_fds).unwrap_or(u64::MAX);
        stats.max_fds = max_open_files(&limits);
        stats.start_time_seconds = std::fs::read_to_string("/proc/stat")
            .ok()
            .and_then(|system| start_time_seconds(&stat, &system));
        Some(stats)
    }

    /// Parses the two files' text; `None` if a field is missing. The start time and the file
    /// descriptors, read from other files, are left empty.
    fn parse(stat: &str, status: &str) -> Option<ProcessStats> {
        let fields = stat_fields_after_name(stat)?;
        // Fields 14 and 15 (utime, stime) are the 12th and 13th after the name; field 20
        // (num_threads) the 18th.
        let ticks = |i: usize| fields.get(i)?.parse::<u64>().ok();
        let cpu_seconds = (ticks(11)? + ticks(12)?) as f64 / USER_HZ;
        let threads = ticks(17)?;
        let kib = |key: &str| {
            let line = status.lines().find(|l| l.starts_with(key))?;
            line[key.len()..].split_whitespace().next()?.parse::<u64>().ok().map(|k| k * 1024)
        };
        Some(ProcessStats {
            cpu_seconds,
            resident_bytes: kib("VmRSS:")?,
            virtual_bytes: kib("VmSize:")?,
            threads,
            start_time_seconds: None,
            open_fds: 0,
            max_fds: None,
        })
    }
}

/// The fields of `/proc/self/stat` after the command name (field 2, in parentheses, may hold
/// spaces): field 3 is the first.
fn stat_fields_after_name(stat: &str) -> Option<Vec<&str>> {
    let (_, after) = stat.rsplit_once(')')?;
    Some(after.split_whitespace().collect())
}

/// When the process started, seconds since the Unix epoch: the boot time (`btime` of
/// `/proc/stat`) plus the process's start (field 22 of `/proc/self/stat`, ticks since boot).
fn start_time_seconds(stat: &str, system: &str) -> Option<f64> {
    let fields = stat_fields_after_name(stat)?;
    let ticks = fields.get(19)?.parse::<u64>().ok()?;
    let boot = system.lines().find_map(|l| l.strip_prefix("btime "))?.trim().parse::<u64>().ok()?;
    Some(boot as f64 + ticks as f64 / USER_HZ)
}

/// The soft limit on open files from `/proc/self/limits` (`Max open files  1024  1048576  files`);
/// `None` if unlimited or missing.
fn max_open_files(limits: &str) -> Option<u64> {
    let line = limits.lines().find_map(|l| l.strip_prefix("Max open files"))?;
    line.split_whitespace().next()?.parse::<u64>().ok()
}

fn seconds(duration: Duration) -> f64 {
    duration.as_secs_f64()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::ALL_CLOSE_CODES;
    use crate::store::SaveOutcome;
    use gatehouse_protocol::CloseCode;

    /// Every close code the protocol defines has a series of its own, under its own name: none
    /// is counted as `other`, and no two share a label.
    #[test]
    fn every_close_code_has_a_label_of_its_own() {
        let names: std::collections::BTreeSet<&str> =
            ALL_CLOSE_CODES.iter().map(|c| close_code_name(*c)).collect();
        assert_eq!(names.len(), ALL_CLOSE_CODES.len());
        assert!(!names.contains("other"));
        assert_eq!(close_code_name(CloseCode::WorldUnavailable), "world_unavailable");
        assert_eq!(close_code_name(CloseCode::Travelled), "travelled");
        assert_eq!(close_code_name(CloseCode::Recalled), "recalled");
        for code in 0..=u64::from(CloseCode::Recalled.code()) {
            let known = CloseCode::from_code(code).expect("a code of ours");
            assert!(ALL_CLOSE_CODES.contains(&known), "{known:?} has no series");
        }
    }

    #[test]
    fn process_stats_are_parsed_after_a_command_name_with_spaces() {
        let stat = "4242 (game (server) 1) S 1 4242 4242 0 -1 4194560 900 0 0 0 250 50 0 0 20 0 7 0 100 2000000 3000 18446744073709551615";
        let status = "Name:\tgatehouse\nVmSize:\t  204800 kB\nVmRSS:\t   51200 kB\nThreads:\t7\n";
        let stats = ProcessStats::parse(stat, status).unwrap();
        assert_eq!(stats.cpu_seconds, 3.0, "250 + 50 ticks at 100 Hz");
        assert_eq!(stats.threads, 7);
        assert_eq!(stats.resident_bytes, 51200 * 1024);
        assert_eq!(stats.virtual_bytes, 204800 * 1024);
    }

    #[test]
    fn process_start_time_and_descriptor_limit_are_parsed() {
        // Field 22 (starttime) is 12345 ticks after boot.
        let stat = "4242 (gatehouse) S 1 4242 4242 0 -1 4194560 900 0 0 0 250 50 0 0 20 0 7 0 12345 2000000 3000";
        let system = "cpu  1 2 3 4\nbtime 1765000000\nprocesses 99\n";
        assert_eq!(start_time_seconds(stat, system), Some(1_765_000_000.0 + 123.45));
        assert_eq!(start_time_seconds(stat, "cpu 1 2 3\n"), None, "no boot time");
        let limits = "Limit                     Soft Limit           Hard Limit           Units\n\
            Max processes             63439                63439                processes\n\
            Max open files            1024                 1048576              files\n";
        assert_eq!(max_open_files(limits), Some(1024));
        let unlimited =
            "Max open files            unlimited            unlimited            files\n";
        assert_eq!(max_open_files(unlimited), None);
    }

    /// On Linux the process families are there, named in base units, and plausible.
    #[cfg(target_os = "linux")]
    #[test]
    fn process_start_time_and_file_descriptors_are_exported() {
        let text = Metrics::new().encode().unwrap();
        let value = |name: &str| -> f64 {
            let line = text
                .lines()
                .find(|l| l.starts_with(&format!("{name} ")))
                .unwrap_or_else(|| panic!("no {name}:\n{text}"));
            line.rsplit(' ').next().unwrap().parse().unwrap()
        };
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        let started = value("process_start_time_seconds");
        assert!(started > now - 86_400.0 && started <= now + 1.0, "{started} vs {now}");
        assert!(value("process_open_fds") >= 3.0, "stdin, stdout, stderr at least");
        assert!(text.contains("# TYPE process_cpu_seconds_total counter"), "{text}");
        if let Some(max) = text.lines().find(|l| l.starts_with("process_max_fds ")) {
            assert!(value("process_max_fds") >= value("process_open_fds"), "{max}");
        }
    }

    #[test]
    fn build_info_has_a_revision() {
        let text = Metrics::new().encode().unwrap();
        let line = text
            .lines()
            .find(|l| l.starts_with("gatehouse_build_info{"))
            .unwrap_or_else(|| panic!("no build info:\n{text}"));
        assert!(line.contains(&format!("revision=\"{REVISION}\"")), "{line}");
        assert!(line.ends_with(" 1"), "{line}");
        assert!(!REVISION.is_empty());
        // A commit of 12 hex digits, or what GATEHOUSE_REVISION said, or `unknown`.
        assert!(
            REVISION.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b)),
            "{REVISION}"
        );
    }

    #[test]
    fn metrics_report_the_transition_phase() {
        let metrics = Metrics::new();
        let text = metrics.encode().unwrap();
        for phase in PHASES {
            let line = format!("gatehouse_transition_phase{{phase=\"{phase}\"}} 0");
            assert!(text.contains(&line), "before any sample, {line}:\n{text}");
        }
        assert!(text.contains("# TYPE gatehouse_world_node_info gauge"), "{text}");
        assert!(!text.contains("gatehouse_world_node_info{"), "no node yet:\n{text}");

        metrics.set_core_sample(CoreSample {
            phase: "Loading",
            node: Some(NodeId::new("harbor").unwrap()),
            ..CoreSample::default()
        });
        let text = metrics.encode().unwrap();
        for phase in PHASES {
            let value = u8::from(phase == "Loading");
            let line = format!("gatehouse_transition_phase{{phase=\"{phase}\"}} {value}");
            assert!(text.contains(&line), "{line}:\n{text}");
        }
        assert!(text.contains("gatehouse_world_node_info{node=\"harbor\"} 1"), "{text}");
        assert_eq!(text.matches("gatehouse_world_node_info{").count(), 1, "{text}");
    }

    #[test]
    fn game_loop_lag_is_counted_in_its_buckets() {
        let metrics = Metrics::new();
        metrics.game().observe_loop_lag(Duration::from_micros(300));
        metrics.game().observe_loop_lag(Duration::from_millis(40));
        let text = metrics.encode().unwrap();
        assert!(text.contains("gatehouse_game_loop_lag_seconds_count 2"), "{text}");
        assert!(text.contains("gatehouse_game_loop_lag_seconds_bucket{le=\"0.0005\"} 1"), "{text}");
        assert!(text.contains("gatehouse_game_loop_lag_seconds_bucket{le=\"0.05\"} 2"), "{text}");
    }

    #[test]
    fn quic_rtt_and_loss_are_exported_without_per_connection_labels() {
        let metrics = Metrics::new();
        let net = metrics.net();
        // Two connections, the first sampled twice: its counts are added as differences.
        let a1 = QuicSample {
            rtt: Duration::from_millis(30),
            sent_packets: 100,
            lost_packets: 2,
            lost_bytes: 2400,
            congestion_events: 1,
        };
        let a2 = QuicSample {
            rtt: Duration::from_millis(35),
            sent_packets: 150,
            lost_packets: 3,
            lost_bytes: 3600,
            congestion_events: 1,
        };
        let b = QuicSample {
            rtt: Duration::from_millis(3),
            sent_packets: 10,
            lost_packets: 0,
            lost_bytes: 0,
            congestion_events: 0,
        };
        net.record_quic(&QuicSample::default(), &a1, true);
        net.record_quic(&a1, &a2, true);
        net.record_quic(&QuicSample::default(), &b, true);
        // The last record of a closed connection adds its counts, not its RTT.
        net.record_quic(&b, &QuicSample { sent_packets: 12, ..b }, false);
        let text = metrics.encode().unwrap();
        for line in [
            "gatehouse_quic_rtt_seconds_count 3",
            "gatehouse_quic_rtt_seconds_bucket{le=\"0.005\"} 1",
            "gatehouse_quic_rtt_seconds_bucket{le=\"0.04\"} 3",
            "gatehouse_quic_sent_packets_total 162",
            "gatehouse_quic_lost_packets_total 3",
            "gatehouse_quic_lost_bytes_total 3600",
            "gatehouse_quic_congestion_events_total 1",
        ] {
            assert!(text.contains(line), "{line}:\n{text}");
        }
        // One series per family (the histogram's buckets aside): no connection label.
        for line in text.lines().filter(|l| l.starts_with("gatehouse_quic_")) {
            let labels = line.split_once('{').map_or("", |(_, rest)| rest);
            assert!(labels.is_empty() || labels.starts_with("le="), "{line}");
        }
    }

    #[test]
    fn fleet_sdk_errors_are_listed_by_call_from_the_start() {
        let metrics = Metrics::new();
        let text = metrics.encode().unwrap();
        for call in ["ready", "allocate", "health", "list", "shutdown"] {
            let line = format!("gatehouse_fleet_sdk_errors_total{{call=\"{call}\"}} 0");
            assert!(text.contains(&line), "{line}:\n{text}");
        }
        metrics.fleet().count_error(SdkCall::List);
        assert_eq!(metrics.fleet().errors(SdkCall::List), 1);
        let text = metrics.encode().unwrap();
        assert!(text.contains("gatehouse_fleet_sdk_errors_total{call=\"list\"} 1"), "{text}");
    }

    #[test]
    fn every_family_has_help_and_the_labelled_ones_start_at_zero() {
        let text = Metrics::new().encode().unwrap();
        for line in text.lines().filter(|l| l.starts_with("# TYPE ")) {
            let name = line.split_whitespace().nth(2).unwrap();
            assert!(text.contains(&format!("# HELP {name} ")), "{name} has no HELP:\n{text}");
        }
        assert!(text.contains("gatehouse_transitions_ended_total{outcome=\"superseded\"} 0"));
        assert!(text.contains("gatehouse_build_info{version=\""), "{text}");
    }

    #[test]
    fn an_observed_transition_is_counted_by_outcome_and_timed() {
        let metrics = Metrics::new();
        metrics.game().observe(Observation::TransitionEnded {
            outcome: TransitionOutcome::Completed,
            duration: Duration::from_millis(300),
        });
        let text = metrics.encode().unwrap();
        assert!(
            text.contains("gatehouse_transitions_ended_total{outcome=\"completed\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("gatehouse_transition_duration_seconds_count{outcome=\"completed\"} 1"),
            "{text}"
        );
    }

    #[test]
    fn every_decision_counter_is_described() {
        let serialized = serde_json::to_value(Counters::default()).unwrap();
        let fields: Vec<&str> =
            serialized.as_object().unwrap().keys().map(String::as_str).collect();
        let mut described: Vec<&str> =
            Counters::default().described().iter().map(|(name, _, _)| *name).collect();
        described.sort_unstable();
        let mut fields = fields;
        fields.sort_unstable();
        assert_eq!(described, fields);
    }

    #[test]
    fn a_save_is_counted_once_by_how_it_ended() {
        let metrics = Metrics::new();
        let store = metrics.store();
        store.count_save(&SaveOutcome::Saved { version: 1, attempts: 1 });
        store.count_save(&SaveOutcome::Saved { version: 2, attempts: 3 });
        store.count_save(&SaveOutcome::Conflict { expected: 1, found: Some(3) });
        store.count_save(&SaveOutcome::Failed { attempts: 3, reason: "down".into() });
        let text = metrics.encode().unwrap();
        for outcome in ["ok", "retried", "conflict", "given_up"] {
            let line = format!("gatehouse_saves_total{{outcome=\"{outcome}\"}} 1");
            assert!(text.contains(&line), "{line} missing:\n{text}");
        }
    }
}
