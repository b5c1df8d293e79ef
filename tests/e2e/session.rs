//! The walking-skeleton session: boot transition, late join, route travel.

use std::time::Duration;

use gatehouse_client_sim::report::SwarmReport;
use gatehouse_client_sim::swarm::run_swarm_outcomes;
use gatehouse_tests::worlds::{self, SLOW_BOOT};
use gatehouse_tests::{TestServer, wait_for_snapshot, within};

/// 8 clients pass through the boot transition; a ninth joins late and is spawned at once;
/// every client ends with exactly one pawn, every transition ended, and no client saw a
/// transition end before it had acknowledged its pawn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_clients_pass_the_boot_transition_and_a_late_joiner_is_spawned_at_once() {
    let server = TestServer::start(SLOW_BOOT).await;
    let first = tokio::spawn(run_swarm_outcomes(server.swarm(8, 0, Duration::from_secs(10))));
    // The boot transition ends once all 8 are placed; only then does the ninth join.
    wait_for_snapshot(&server.handle, Duration::from_secs(15), "the boot transition to end", |s| {
        s.counters.transitions_completed == 1 && s.players.len() == 8
    })
    .await;
    let late = tokio::spawn(run_swarm_outcomes(server.swarm(1, 8, Duration::from_secs(4))));
    // While everyone is still connected: one pawn each, all placed, no transition in flight.
    let snapshot =
        wait_for_snapshot(&server.handle, Duration::from_secs(10), "nine placed players", |s| {
            s.players.len() == 9 && s.players.iter().all(|p| p.placed)
        })
        .await;
    assert!(snapshot.players.iter().all(|p| p.owned_pawns == 1 && p.placed), "{snapshot:?}");
    assert_eq!(snapshot.phase, "None");
    assert_eq!(snapshot.counters.transitions_started, 1);
    assert_eq!(snapshot.counters.transitions_completed, 1);

    let first = within(Duration::from_secs(20), "the first swarm", first).await.unwrap().unwrap();
    let late = within(Duration::from_secs(20), "the late joiner", late).await.unwrap().unwrap();
    for o in first.iter().chain(&late) {
        assert!(o.connected && o.placed, "client {} not placed: {o:?}", o.index);
        assert_eq!(o.own_pawns, 1, "client {}", o.index);
        assert!(o.errors.is_empty() && o.stats.errors.is_empty(), "client {}: {o:?}", o.index);
        assert_eq!(o.stats.ended_before_placed, 0, "client {}", o.index);
    }
    for o in &first {
        assert_eq!(
            o.stats.transitions_ended.len(),
            1,
            "client {} saw the boot transition end",
            o.index
        );
    }
    assert!(late[0].stats.transitions_ended.is_empty(), "the late joiner saw no transition");
    let report = SwarmReport::from_outcomes(&first);
    assert_eq!((report.clients_placed, report.errors, report.transitions_completed), (8, 0, 1));
    server.stop().await;
}

/// With a route every 2 s, clients go through route transitions and stay placed. (The route
/// revisits the fast node, so the run ends in a quiet moment after the travel at 4 s.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn route_transitions_complete_with_every_client_placed() {
    let world = worlds::with_route(SLOW_BOOT, &["forest"], 2000);
    let server = TestServer::start(&world).await;
    let outcomes = within(
        Duration::from_secs(30),
        "the swarm",
        run_swarm_outcomes(server.swarm(6, 0, Duration::from_millis(5000))),
    )
    .await
    .unwrap();
    let report = SwarmReport::from_outcomes(&outcomes);
    assert_eq!(report.clients_placed, 6, "{report}");
    assert_eq!(report.errors, 0, "{report}");
    assert_eq!(report.ended_before_placed, 0, "{report}");
    assert!(report.transitions_completed >= 3, "boot plus two route travels: {report}");
    assert!(outcomes.iter().all(|o| o.own_pawns == 1));
    let counters = server.handle.snapshot().await.unwrap().counters;
    assert!(
        counters.pawns_teleported >= 6,
        "existing pawns are teleported, not respawned: {counters:?}"
    );
    assert_eq!(counters.pawns_spawned, 6, "one pawn per player over the whole run: {counters:?}");
    server.stop().await;
}
