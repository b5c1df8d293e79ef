//! The server under Agones (docs/operations.md, "Under Agones"), against a fake SDK sidecar
//! that speaks the agones crate's own protocol ([`fake_sdk`]). Needs the `agones` feature:
//! `cargo test -p gatehouse-server --features agones --test agones`.
//!
//! The order pinned here (see `server/src/fleet/mod.rs`): the certificate's fingerprint
//! published first; Health pings start with the game loop, before Ready, and go on through the
//! boot load; Ready once the boot transition has ended; the first player allocates the server
//! before it is added to the `players` List; each player removed when it leaves; an empty
//! server back to Ready (or shut down) after its linger; Shutdown last, at the end of the drain,
//! with no ping after it. The allocation model is docs/operations.md, "Allocation".

// Tests: a failed expectation is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod allocator;
mod fake_allocator;
mod fake_sdk;

use std::time::Duration;

use fake_sdk::{Call, FakeSdk, GameServerState};
use gatehouse_client_sim::swarm::{player_id, run_swarm_outcomes};
use gatehouse_tests::worlds::SLOW_BOOT;
use gatehouse_tests::{TestServer, http, within};

const PLAYERS: &str = "players";
const FINGERPRINT: &str = "gatehouse-certificate-sha256";

/// The server's certificate's SHA-256 fingerprint, as the server publishes it.
fn fingerprint(server: &TestServer) -> String {
    use sha2::Digest;
    let der = std::fs::read(&server.cert).unwrap();
    let digest = sha2::Sha256::digest(&der);
    digest.iter().map(|b| format!("{b:02X}")).collect::<Vec<_>>().join(":")
}

/// A fleet config for the fake SDK: pings every 100 ms, and `extra` keys of `[fleet]`.
fn fleet_config(fake: &FakeSdk, extra: &str) -> String {
    format!(
        "[fleet]\norchestrator = \"agones\"\nagones_sdk_port = {}\nhealth_interval_ms = 100\n\
         sdk_timeout_ms = 2000\n{extra}",
        fake.port
    )
}

/// Starts a server with `config` and waits for its Ready.
async fn ready_server(fake: &FakeSdk, config: &str) -> TestServer {
    let server = within(
        Duration::from_secs(40),
        "the server to connect to the SDK and bind",
        TestServer::start_with(config, gatehouse_tests::worlds::QUICK),
    )
    .await;
    fake.wait_for(Duration::from_secs(10), "Ready", |calls| calls.contains(&Call::Ready)).await;
    server
}

/// One player connects, stays `stay`, and leaves.
async fn one_visit(server: &TestServer, index: usize, stay: Duration) {
    let outcomes = within(
        Duration::from_secs(20),
        "one player's visit",
        run_swarm_outcomes(server.swarm(1, index, stay)),
    )
    .await
    .unwrap();
    assert!(outcomes.iter().all(|o| o.connected && o.errors.is_empty()), "{outcomes:?}");
}

fn count(calls: &[Call], call: &Call) -> usize {
    calls.iter().filter(|c| *c == call).count()
}

fn position(calls: &[Call], call: &Call) -> usize {
    calls.iter().position(|c| c == call).unwrap_or_else(|| panic!("no {call:?} in {calls:?}"))
}

/// Ready after the boot load, with Health pinged all through it and after; two players in the
/// `players` List while connected and out of it once they leave; Shutdown last, after the
/// drain.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agones_hears_health_through_the_boot_load_then_ready_the_players_and_shutdown_last() {
    let fake = FakeSdk::start().await;
    let config = fleet_config(&fake, "");
    // SLOW_BOOT streams its start node for 1.5 s: the boot transition is a long load.
    let server = within(
        Duration::from_secs(40),
        "the server to connect to the SDK and bind",
        TestServer::start_with(&config, SLOW_BOOT),
    )
    .await;
    fake.wait_for(Duration::from_secs(10), "Ready", |calls| calls.contains(&Call::Ready)).await;
    let before_ready = fake.calls();
    let pings_during_boot = count(&before_ready, &Call::Health);
    assert!(
        pings_during_boot >= 5,
        "pings every 100 ms through the 1.5 s boot load, before Ready: {before_ready:?}"
    );

    // Two players connect, stay 2 s, leave.
    let swarm = tokio::spawn(run_swarm_outcomes(server.swarm(2, 0, Duration::from_secs(2))));
    let (a, b) = (player_id(0).as_str().to_owned(), player_id(1).as_str().to_owned());
    let added = |p: &str| Call::ListAdd(PLAYERS.into(), p.to_owned());
    let removed = |p: &str| Call::ListRemove(PLAYERS.into(), p.to_owned());
    fake.wait_for(Duration::from_secs(10), "both players in the list", |calls| {
        calls.contains(&added(&a)) && calls.contains(&added(&b))
    })
    .await;
    let mut listed = fake.list(PLAYERS);
    listed.sort();
    assert_eq!(listed, [a.clone(), b.clone()], "the list holds the connected players");
    assert_eq!(fake.state(), GameServerState::Allocated, "players on it: Allocated");
    let outcomes = within(Duration::from_secs(20), "the swarm", swarm).await.unwrap().unwrap();
    assert!(outcomes.iter().all(|o| o.connected && o.errors.is_empty()), "{outcomes:?}");
    fake.wait_for(Duration::from_secs(10), "both players out of the list", |calls| {
        calls.contains(&removed(&a)) && calls.contains(&removed(&b))
    })
    .await;
    assert!(fake.list(PLAYERS).is_empty(), "nobody is connected");
    // The loop goes on pinging with nobody connected.
    let after_leaving = count(&fake.calls(), &Call::Health);
    fake.wait_for(Duration::from_secs(5), "more pings", |calls| {
        count(calls, &Call::Health) >= after_leaving + 2
    })
    .await;

    let server_cert = fingerprint(&server);
    server.stop().await;
    fake.wait_for(Duration::from_secs(10), "Shutdown", |calls| calls.contains(&Call::Shutdown))
        .await;
    // Anything still in flight would land now.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let calls = fake.calls();
    fake.stop().await;

    let ready = position(&calls, &Call::Ready);
    assert_eq!(count(&calls, &Call::Ready), 1, "Ready once (the linger is 60 s): {calls:?}");
    let published = Call::SetAnnotation(FINGERPRINT.into(), server_cert.clone());
    assert!(position(&calls, &published) < ready, "the fingerprint before Ready: {calls:?}");
    let allocate = position(&calls, &Call::Allocate);
    assert_eq!(count(&calls, &Call::Allocate), 1, "allocated once: {calls:?}");
    assert!(ready < allocate, "Ready, then Allocate: {calls:?}");
    assert_eq!(calls.last(), Some(&Call::Shutdown), "Shutdown last: {calls:?}");
    assert_eq!(count(&calls, &Call::Shutdown), 1, "Shutdown once: {calls:?}");
    for player in [&a, &b] {
        let (add, remove) = (position(&calls, &added(player)), position(&calls, &removed(player)));
        assert!(allocate < add && add < remove, "{player}: allocated, added, removed: {calls:?}");
        assert_eq!(count(&calls, &added(player)), 1, "{player} added once: {calls:?}");
        assert_eq!(count(&calls, &removed(player)), 1, "{player} removed once: {calls:?}");
    }
    let pings_after_ready = calls[ready..].iter().filter(|c| **c == Call::Health).count();
    assert!(pings_after_ready >= 10, "pings go on after Ready: {calls:?}");
    let unexpected: Vec<&Call> = calls.iter().filter(|c| matches!(c, Call::Other(_))).collect();
    assert!(unexpected.is_empty(), "no other SDK call: {unexpected:?}");
    assert!(
        calls.iter().take_while(|c| **c == Call::GetGameServer).count() >= 1,
        "the SDK checked the connection first: {calls:?}"
    );
}

/// `when_empty = "ready"`: once the last player has left and the linger has passed, the server
/// is Ready again (back in the pool, where a scale-down may take it), and its next player
/// allocates it again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_server_goes_back_to_ready_after_its_linger_and_its_next_player_allocates_it() {
    let fake = FakeSdk::start().await;
    let config = fleet_config(&fake, "when_empty = \"ready\"\nempty_linger_ms = 500\n");
    let server = ready_server(&fake, &config).await;
    one_visit(&server, 0, Duration::from_millis(500)).await;
    fake.wait_for(Duration::from_secs(10), "Ready again after the linger", |calls| {
        count(calls, &Call::Ready) == 2
    })
    .await;
    assert_eq!(fake.state(), GameServerState::Ready);
    one_visit(&server, 1, Duration::from_millis(200)).await;
    fake.wait_for(Duration::from_secs(10), "the second release", |calls| {
        count(calls, &Call::Ready) == 3
    })
    .await;
    server.stop().await;
    let calls = fake.calls();
    fake.stop().await;
    let sequence: Vec<&Call> =
        calls.iter().filter(|c| matches!(c, Call::Ready | Call::Allocate)).collect();
    assert_eq!(
        sequence,
        [&Call::Ready, &Call::Allocate, &Call::Ready, &Call::Allocate, &Call::Ready],
        "Ready, then per visit Allocate and Ready again: {calls:?}"
    );
    let (a, b) = (player_id(0).as_str().to_owned(), player_id(1).as_str().to_owned());
    let removed = position(&calls, &Call::ListRemove(PLAYERS.into(), a));
    let added = position(&calls, &Call::ListAdd(PLAYERS.into(), b));
    let released = calls.iter().enumerate().filter(|(_, c)| **c == Call::Ready).nth(1).unwrap().0;
    assert!(removed < released && released < added, "released between the visits: {calls:?}");
}

/// `allocation = "matchmaker"`: the allocator allocates the Ready server; the player's arrival
/// calls no Allocate; the empty server is Ready again after the linger.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_matchmaker_allocated_server_is_released_after_its_players_leave() {
    let fake = FakeSdk::start().await;
    let config = fleet_config(
        &fake,
        "allocation = \"matchmaker\"\nwhen_empty = \"ready\"\nempty_linger_ms = 300\n",
    );
    let server = ready_server(&fake, &config).await;
    assert!(fake.allocate_ready(), "the allocator finds the server Ready");
    assert!(!fake.allocate_ready(), "and allocates it once");
    one_visit(&server, 0, Duration::from_millis(500)).await;
    assert_eq!(fake.state(), GameServerState::Allocated, "still allocated within the linger");
    fake.wait_for(Duration::from_secs(10), "Ready again", |calls| count(calls, &Call::Ready) == 2)
        .await;
    assert_eq!(fake.state(), GameServerState::Ready, "back in the pool");
    server.stop().await;
    let calls = fake.calls();
    fake.stop().await;
    assert_eq!(count(&calls, &Call::Allocate), 0, "the server never allocates itself: {calls:?}");
}

/// `when_empty = "shutdown"`: once empty for the linger, the server drains and stops on its
/// own, telling Agones Shutdown (the Fleet replaces it with a fresh one).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_server_shuts_down_after_its_linger_when_told_to() {
    let fake = FakeSdk::start().await;
    let config = fleet_config(&fake, "when_empty = \"shutdown\"\nempty_linger_ms = 300\n");
    let server = ready_server(&fake, &config).await;
    one_visit(&server, 0, Duration::from_millis(300)).await;
    server.stopped(Duration::from_secs(20)).await.unwrap();
    let calls = fake.calls();
    fake.stop().await;
    assert_eq!(calls.last(), Some(&Call::Shutdown), "Shutdown last: {calls:?}");
    assert_eq!(count(&calls, &Call::Ready), 1, "never released before the drain: {calls:?}");
    let player = player_id(0).as_str().to_owned();
    let removed = position(&calls, &Call::ListRemove(PLAYERS.into(), player));
    assert!(removed < position(&calls, &Call::Shutdown), "{calls:?}");
}

/// `publish_certificate_fingerprint = false`: no annotation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fingerprint_is_published_only_when_asked() {
    let fake = FakeSdk::start().await;
    let config = fleet_config(&fake, "publish_certificate_fingerprint = false\n");
    let server = ready_server(&fake, &config).await;
    server.stop().await;
    assert_eq!(fake.annotation(FINGERPRINT), None);
    fake.stop().await;
}

/// docs/operations.md, "Metrics": a Ready the sidecar refuses is counted in
/// `gatehouse_fleet_sdk_errors_total{call="ready"}` and tried again a second later; the other
/// calls stay at 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_sdk_call_is_counted_by_call() {
    let fake = FakeSdk::start().await;
    fake.refuse_ready(1);
    let config = format!(
        "[fleet]\norchestrator = \"agones\"\nagones_sdk_port = {}\nhealth_interval_ms = 100\n\
         sdk_timeout_ms = 2000\n",
        fake.port
    );
    let server = within(
        Duration::from_secs(40),
        "the server to connect to the SDK and bind",
        TestServer::start_with(&config, SLOW_BOOT),
    )
    .await;
    fake.wait_for(Duration::from_secs(15), "Ready refused, then told again", |calls| {
        count(calls, &Call::Ready) >= 2
    })
    .await;
    let (status, text) = http(server.admin, "GET", "/metrics").await;
    assert_eq!(status, 200, "{text}");
    for (call, errors) in
        [("ready", 1), ("allocate", 0), ("health", 0), ("list", 0), ("shutdown", 0)]
    {
        let line = format!("gatehouse_fleet_sdk_errors_total{{call=\"{call}\"}} {errors}");
        assert!(text.contains(&line), "{line}:\n{text}");
    }
    server.stop().await;
    fake.wait_for(Duration::from_secs(10), "Shutdown", |calls| calls.contains(&Call::Shutdown))
        .await;
    fake.stop().await;
}
