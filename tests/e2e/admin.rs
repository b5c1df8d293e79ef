//! The admin HTTP endpoint on loopback: health, state, metrics and operator travel.

use std::time::Duration;

use gatehouse_client_sim::swarm::run_swarm_outcomes;
use gatehouse_tests::worlds::SLOW_BOOT;
use gatehouse_tests::{TestServer, http, wait_for_snapshot, within};

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
