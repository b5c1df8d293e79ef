//! The admin HTTP endpoint on loopback: probes, state, metrics and operator travel.

use std::collections::HashMap;
use std::time::Duration;

use gatehouse_client_sim::swarm::{mint_token, player_id, run_swarm_outcomes};
use gatehouse_protocol::token::TokenKey;
use gatehouse_protocol::{ClientMessage, PROTOCOL_VERSION};
use gatehouse_tests::worlds::SLOW_BOOT;
use gatehouse_tests::{TestServer, frames, http, wait_for_snapshot, within};
use prometheus_parse::{LineInfo, SampleType, Scrape, Value};

/// Health answers, the state names the phase, players and pending spawns, metrics are in the
/// Prometheus format, and a travel request starts a transition (an unknown node is a 404 that
/// names it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_endpoint_reports_state_and_starts_travels() {
    let server = TestServer::start(SLOW_BOOT).await;
    let swarm = tokio::spawn(run_swarm_outcomes(server.swarm(2, 0, Duration::from_secs(8))));
    wait_for_snapshot(&server.handle, Duration::from_secs(10), "both clients placed", |s| {
        s.phase == "None" && s.players.len() == 2 && s.players.iter().all(|p| p.placed)
    })
    .await;

    assert_eq!(http(server.admin, "GET", "/health").await, (200, "ok\n".to_owned()));
    let (status, body) = http(server.admin, "GET", "/state").await;
    assert_eq!(status, 200);
    let state: serde_json::Value = serde_json::from_str(&body).expect("JSON state");
    assert_eq!(state["phase"], "None", "{state}");
    assert_eq!(state["players"].as_array().map(Vec::len), Some(2), "{state}");
    assert_eq!(state["players"][0]["placed"], true, "{state}");
    assert!(state["pending_spawns"].is_array() && state["unplaced_players"].is_array());

    let (status, body) = http(server.admin, "POST", "/travel/atlantis").await;
    assert_eq!(status, 404);
    assert!(body.contains("atlantis"), "{body}");
    let (status, _) = http(server.admin, "POST", "/travel/forest").await;
    assert_eq!(status, 202);
    let (_, body) = http(server.admin, "GET", "/state").await;
    let state: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(state["transition_target"], "forest", "{state}");

    let (status, metrics) = http(server.admin, "GET", "/metrics").await;
    assert_eq!(status, 200);
    assert!(metrics.contains("gatehouse_transitions_started_total 2"), "{metrics}");
    assert!(metrics.contains("gatehouse_players 2"), "{metrics}");
    within(Duration::from_secs(20), "the swarm", swarm).await.unwrap().unwrap();
    server.stop().await;
}

/// The Prometheus families `/metrics` must serve (docs/operations.md, "Metrics"), with their types.
const FAMILIES: &[(&str, SampleType)] = &[
    ("gatehouse_transition_phase_duration_seconds", SampleType::Histogram),
    ("gatehouse_transition_duration_seconds", SampleType::Histogram),
    ("gatehouse_client_ready_seconds", SampleType::Histogram),
    ("gatehouse_spawn_queue_wait_seconds", SampleType::Histogram),
    ("gatehouse_store_save_seconds", SampleType::Histogram),
    ("gatehouse_store_load_seconds", SampleType::Histogram),
    ("gatehouse_transitions_ended_total", SampleType::Counter),
    ("gatehouse_connection_closes_total", SampleType::Counter),
    ("gatehouse_logins_refused_total", SampleType::Counter),
    ("gatehouse_saves_total", SampleType::Counter),
    ("gatehouse_spawn_refusals_total", SampleType::Counter),
    ("gatehouse_transitions_started_total", SampleType::Counter),
    ("gatehouse_pending_connections", SampleType::Gauge),
    ("gatehouse_players", SampleType::Gauge),
    ("gatehouse_placed_players", SampleType::Gauge),
    ("gatehouse_pending_spawns", SampleType::Gauge),
    ("gatehouse_loads_in_flight", SampleType::Gauge),
    ("gatehouse_build_info", SampleType::Gauge),
    ("gatehouse_transition_phase", SampleType::Gauge),
    ("gatehouse_world_node_info", SampleType::Gauge),
    ("gatehouse_game_loop_lag_seconds", SampleType::Histogram),
    ("gatehouse_quic_rtt_seconds", SampleType::Histogram),
    ("gatehouse_quic_sent_packets_total", SampleType::Counter),
    ("gatehouse_quic_lost_packets_total", SampleType::Counter),
    ("gatehouse_quic_lost_bytes_total", SampleType::Counter),
    ("gatehouse_quic_congestion_events_total", SampleType::Counter),
    ("gatehouse_fleet_sdk_errors_total", SampleType::Counter),
    ("process_cpu_seconds_total", SampleType::Counter),
    ("process_resident_memory_bytes", SampleType::Gauge),
    ("process_virtual_memory_bytes", SampleType::Gauge),
    ("process_start_time_seconds", SampleType::Gauge),
    ("process_open_fds", SampleType::Gauge),
];

/// `/metrics` read with a real Prometheus text-format parser: the families and their types
/// from the `# TYPE` lines, the `# HELP` of each, the samples.
fn parse_metrics(text: &str) -> (HashMap<String, SampleType>, Scrape) {
    let mut types = HashMap::new();
    for line in text.lines() {
        if let LineInfo::Type { metric_name, metric_alias, sample_type } = LineInfo::parse(line) {
            // A histogram's type is filed under its `_bucket` samples, its name is the alias.
            types.insert(metric_alias.unwrap_or(metric_name), sample_type);
        }
    }
    let scrape = match Scrape::parse(text.lines().map(|l| Ok(l.to_owned()))) {
        Ok(scrape) => scrape,
        Err(e) => panic!("the metrics text does not parse: {e}"),
    };
    (types, scrape)
}

/// The value of the counter sample `name{label="value"}`.
fn counter(scrape: &Scrape, name: &str, label: (&str, &str)) -> f64 {
    scrape
        .samples
        .iter()
        .find(|s| s.metric == name && s.labels.get(label.0) == Some(label.1))
        .map(|s| match s.value {
            Value::Counter(v) => v,
            ref other => panic!("{name} is not a counter: {other:?}"),
        })
        .unwrap_or_else(|| panic!("no sample {name}{{{}=\"{}\"}}", label.0, label.1))
}

/// The value of the gauge sample `name{label="value"}`.
fn gauge(scrape: &Scrape, name: &str, label: (&str, &str)) -> f64 {
    scrape
        .samples
        .iter()
        .find(|s| s.metric == name && s.labels.get(label.0) == Some(label.1))
        .map(|s| match s.value {
            Value::Gauge(v) => v,
            ref other => panic!("{name} is not a gauge: {other:?}"),
        })
        .unwrap_or_else(|| panic!("no sample {name}{{{}=\"{}\"}}", label.0, label.1))
}

/// How many observations the histogram `name` (with `label`, if given) holds: its `+Inf`
/// bucket.
fn histogram_count(scrape: &Scrape, name: &str, label: Option<(&str, &str)>) -> f64 {
    let sample = scrape
        .samples
        .iter()
        .find(|s| s.metric == name && label.is_none_or(|(k, v)| s.labels.get(k) == Some(v)))
        .unwrap_or_else(|| panic!("no histogram {name} {label:?}"));
    let Value::Histogram(buckets) = &sample.value else {
        panic!("{name} is not a histogram: {:?}", sample.value)
    };
    buckets.iter().find(|b| b.less_than.is_infinite()).map_or(0.0, |b| b.count)
}

/// docs/operations.md, "Metrics": every family is served with its `HELP` and its type, and after a
/// travel the transitions completed, the transition duration histogram, the ready reports and the
/// store loads have counts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_parse_with_help_and_type_for_every_family() {
    let server = TestServer::start(SLOW_BOOT).await;
    let swarm = tokio::spawn(run_swarm_outcomes(server.swarm(2, 0, Duration::from_secs(8))));
    wait_for_snapshot(&server.handle, Duration::from_secs(10), "both clients placed", |s| {
        s.phase == "None" && s.players.len() == 2 && s.players.iter().all(|p| p.placed)
    })
    .await;
    assert_eq!(http(server.admin, "POST", "/travel/forest").await.0, 202);
    wait_for_snapshot(&server.handle, Duration::from_secs(10), "the travel to end", |s| {
        s.counters.transitions_completed >= 2 && s.phase == "None"
    })
    .await;

    let (status, text) = http(server.admin, "GET", "/metrics").await;
    assert_eq!(status, 200, "{text}");
    let (types, scrape) = parse_metrics(&text);
    for (family, kind) in FAMILIES {
        assert_eq!(types.get(*family), Some(kind), "{family}'s type:\n{text}");
    }
    for family in types.keys() {
        let help = scrape.docs.get(family).map(String::as_str).unwrap_or_default();
        assert!(!help.is_empty(), "{family} has no HELP:\n{text}");
        assert!(!help.ends_with(".."), "{family}'s HELP ends in two stops: {help}");
    }
    let completed = counter(&scrape, "gatehouse_transitions_ended_total", ("outcome", "completed"));
    assert!(completed >= 2.0, "boot and travel completed: {completed}");
    let timed = histogram_count(
        &scrape,
        "gatehouse_transition_duration_seconds",
        Some(("outcome", "completed")),
    );
    assert!(timed >= 2.0, "transition durations observed: {timed}");
    let phases = histogram_count(
        &scrape,
        "gatehouse_transition_phase_duration_seconds",
        Some(("phase", "Loading")),
    );
    assert!(phases >= 2.0, "Loading phases observed: {phases}");
    assert!(histogram_count(&scrape, "gatehouse_client_ready_seconds", None) >= 2.0);
    assert!(histogram_count(&scrape, "gatehouse_store_load_seconds", None) >= 1.0);
    let build = scrape.samples.iter().find(|s| s.metric == "gatehouse_build_info").unwrap();
    assert_eq!(build.labels.get("version"), Some(env!("CARGO_PKG_VERSION")));
    let revision = build.labels.get("revision").unwrap_or_default();
    assert!(!revision.is_empty(), "build_info has a revision: {:?}", build.labels);
    // Between transitions: None is the phase, and the node is the travel's destination.
    let phase = |name: &str| gauge(&scrape, "gatehouse_transition_phase", ("phase", name));
    assert_eq!(phase("None"), 1.0, "{text}");
    for other in ["Freezing", "Loading", "WaitingForClients", "Completing", "Moving"] {
        assert_eq!(phase(other), 0.0, "{other}: {text}");
    }
    assert_eq!(gauge(&scrape, "gatehouse_world_node_info", ("node", "forest")), 1.0, "{text}");
    assert!(histogram_count(&scrape, "gatehouse_game_loop_lag_seconds", None) >= 1.0);
    // Each connection's round-trip time is sampled once its handshake is over; no series has a
    // label but the buckets' `le` (no per-connection label).
    assert!(histogram_count(&scrape, "gatehouse_quic_rtt_seconds", None) >= 2.0, "{text}");
    for sample in scrape.samples.iter().filter(|s| s.metric.starts_with("gatehouse_quic_")) {
        assert!(sample.labels.is_empty(), "{}: {:?}", sample.metric, sample.labels);
    }
    let sent = scrape.samples.iter().find(|s| s.metric == "gatehouse_quic_sent_packets_total");
    assert!(matches!(sent.map(|s| &s.value), Some(Value::Counter(n)) if *n > 0.0), "{text}");
    assert_eq!(counter(&scrape, "gatehouse_fleet_sdk_errors_total", ("call", "ready")), 0.0);
    within(Duration::from_secs(20), "the swarm", swarm).await.unwrap().unwrap();
    // Both clients left with `Leave`: each connection is counted once, whichever side's close
    // came first (the count lands when the close does).
    within(Duration::from_secs(10), "both closes counted", async {
        loop {
            let (_, text) = http(server.admin, "GET", "/metrics").await;
            let closes = closes_total(&parse_metrics(&text).1);
            assert!(closes <= 2.0, "a connection counted twice: {closes}\n{text}");
            if closes == 2.0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    server.stop().await;
}

/// Every connection close counted, whatever its code and side.
fn closes_total(scrape: &Scrape) -> f64 {
    let closes = scrape.samples.iter().filter(|s| s.metric == "gatehouse_connection_closes_total");
    closes.map(|s| if let Value::Counter(v) = s.value { v } else { 0.0 }).sum()
}

/// docs/operations.md, "Admin endpoint": `/ready` is 503, naming the boot transition, until the
/// boot transition ends; then 200. `/health` is 200 throughout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ready_is_503_until_the_boot_transition_ends() {
    let server = TestServer::start(SLOW_BOOT).await;
    let (status, body) = http(server.admin, "GET", "/ready").await;
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("boot transition not done"), "{body}");
    assert_eq!(http(server.admin, "GET", "/health").await, (200, "ok\n".to_owned()));
    within(Duration::from_secs(10), "ready after the boot transition", async {
        while http(server.admin, "GET", "/ready").await != (200, "ready\n".to_owned()) {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    server.stop().await;
}

/// docs/operations.md, "Admin endpoint": from the start of the drain until the process exits, the
/// admin endpoint answers, `/ready` with 503 `draining` and `/health` with 200 `draining`. A client
/// that logs in (after the boot transition, so the server is ready) and stops reading (it grants no
/// flow-control credit) holds the drain open for the connections' drain timeout, so the drain is
/// observed while it runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ready_is_503_during_a_drain() {
    let server = TestServer::start(SLOW_BOOT).await;
    within(Duration::from_secs(10), "ready after the boot transition", async {
        while http(server.admin, "GET", "/ready").await.0 != 200 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    let (endpoint, mut config) =
        gatehouse_client_sim::swarm::client_endpoint(server.addr, &server.cert).unwrap();
    let mut transport = quinn::TransportConfig::default();
    transport.stream_receive_window(quinn::VarInt::from_u32(64));
    transport.receive_window(quinn::VarInt::from_u32(64));
    config.transport_config(std::sync::Arc::new(transport));
    let stuck = within(
        Duration::from_secs(10),
        "connect",
        endpoint.connect_with(config, server.addr, "localhost").unwrap(),
    )
    .await
    .unwrap();
    let (mut send, _recv_never_read) = stuck.open_bi().await.unwrap();
    let token = mint_token(&TokenKey::new(gatehouse_protocol::token::DEV_TOKEN_KEY), player_id(3));
    let hello = ClientMessage::Hello { protocol_version: PROTOCOL_VERSION, token };
    send.write_all(&frames(&[hello])).await.unwrap();
    wait_for_snapshot(&server.handle, Duration::from_secs(10), "the login", |s| {
        s.players.len() == 1
    })
    .await;

    server.begin_shutdown();
    assert_eq!(http(server.admin, "GET", "/ready").await, (503, "draining\n".to_owned()));
    assert_eq!(http(server.admin, "GET", "/health").await, (200, "draining\n".to_owned()));
    let (status, _) = http(server.admin, "GET", "/metrics").await;
    assert_eq!(status, 200, "metrics are still served during the drain");
    let admin = server.admin;
    server.stop().await;
    assert!(
        tokio::net::TcpStream::connect(admin).await.is_err(),
        "the admin endpoint stops once the server has stopped"
    );
}
