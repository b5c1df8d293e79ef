//! The server under Agones (docs/operations.md, "Under Agones"), against a fake SDK sidecar
//! that speaks the agones crate's own protocol ([`fake_sdk`]). Needs the `agones` feature:
//! `cargo test -p gatehouse-server --features agones --test agones`.
//!
//! The order pinned here (see `server/src/fleet/mod.rs`): Health pings start with the game loop,
//! before Ready, and go on through the boot load; Ready once the boot transition has ended; each
//! player added to the `players` List on login and removed when it leaves; Shutdown last, at
//! the end of the drain, with no ping after it.

// Tests: a failed expectation is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod fake_sdk;

use std::time::Duration;

use fake_sdk::{Call, FakeSdk};
use gatehouse_client_sim::swarm::{player_id, run_swarm_outcomes};
use gatehouse_tests::worlds::SLOW_BOOT;
use gatehouse_tests::{TestServer, http, within};

const PLAYERS: &str = "players";

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
    let config = format!(
        "[fleet]\norchestrator = \"agones\"\nagones_sdk_port = {}\nhealth_interval_ms = 100\n\
         sdk_timeout_ms = 2000\n",
        fake.port
    );
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

    server.stop().await;
    fake.wait_for(Duration::from_secs(10), "Shutdown", |calls| calls.contains(&Call::Shutdown))
        .await;
    // Anything still in flight would land now.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let calls = fake.calls();
    fake.stop().await;

    let ready = position(&calls, &Call::Ready);
    assert_eq!(count(&calls, &Call::Ready), 1, "Ready once: {calls:?}");
    assert_eq!(calls.last(), Some(&Call::Shutdown), "Shutdown last: {calls:?}");
    assert_eq!(count(&calls, &Call::Shutdown), 1, "Shutdown once: {calls:?}");
    for player in [&a, &b] {
        let (add, remove) = (position(&calls, &added(player)), position(&calls, &removed(player)));
        assert!(ready < add && add < remove, "{player}: Ready, added, removed: {calls:?}");
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
    for (call, errors) in [("ready", 1), ("health", 0), ("list", 0), ("shutdown", 0)] {
        let line = format!("gatehouse_fleet_sdk_errors_total{{call=\"{call}\"}} {errors}");
        assert!(text.contains(&line), "{line}:\n{text}");
    }
    server.stop().await;
    fake.wait_for(Duration::from_secs(10), "Shutdown", |calls| calls.contains(&Call::Shutdown))
        .await;
    fake.stop().await;
}
