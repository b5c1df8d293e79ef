//! The soak run in CI (docs/testing.md, "Soak"): 16 simulated clients with the `soak` scenario's
//! churn (restart 500 ms after dying, disconnect and relaunch about every 12 s) on the soak world,
//! with its hazards, dungeon and a travel every 4 s, for 40 s, plus operator travels in quick pairs
//! so transitions are superseded under load. Longer and larger runs are `deploy/soak.sh`.

use std::time::Duration;

use gatehouse_client_sim::report::SwarmReport;
use gatehouse_client_sim::swarm::run_swarm_outcomes;
use gatehouse_protocol::NodeId;
use gatehouse_tests::{TestServer, within};

/// Seeds 001 and 000 under churn: transitions complete (some superseded), every death gets
/// its respawn, no client ever sees two live pawns, a double kit grant or a spawn at a stale
/// node, and every client's lifecycle gates open for every pawn generation without a
/// violation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixteen_clients_soak_for_forty_seconds_keeping_every_invariant() {
    let server = TestServer::start(gatehouse_tests::worlds::SOAK).await;
    let mut swarm = server.swarm(16, 0, Duration::from_secs(40));
    swarm.session.restart_after_death = Some(Duration::from_millis(500));
    swarm.relaunch_every = Some(Duration::from_secs(12));
    swarm.settle_grace = Duration::from_secs(10);
    let swarm = tokio::spawn(run_swarm_outcomes(swarm));
    // Travel pairs 150 ms apart: the second supersedes the first while its node still streams.
    let start = tokio::time::Instant::now();
    for (at, first, second) in
        [(6, "marsh", "crypt"), (16, "crypt", "harbor"), (26, "harbor", "marsh")]
    {
        tokio::time::sleep_until(start + Duration::from_secs(at)).await;
        assert!(server.handle.travel(NodeId::new(first).unwrap()).await);
        tokio::time::sleep(Duration::from_millis(150)).await;
        assert!(server.handle.travel(NodeId::new(second).unwrap()).await);
    }
    let outcomes = within(Duration::from_secs(90), "the soak swarm", swarm).await.unwrap().unwrap();
    let report = SwarmReport::from_outcomes(&outcomes);
    // Everything `gatehouse-sim --check` refuses: every client connected and placed, no error,
    // a respawn per death, every must-be-0 figure 0, every pawn generation accounted for.
    let problems = report.problems();
    assert!(problems.is_empty(), "{problems:?}\n{report}");
    assert_eq!(report.clients, 16, "{report}");
    assert!(report.transitions_completed >= 5, "{report}");
    assert!(report.deaths > 0, "the hazards kill: {report}");
    assert!(report.relaunches > 0, "{report}");
    assert!(report.transitions_superseded > 0, "clients saw supersedes: {report}");
    let gates = &report.gates;
    assert!(gates.local_ready_opened > 0 && gates.remote_ready_opened > 0, "{report}");
    assert_eq!(gates.stuck_at_end, 0, "{report}");
    assert_eq!(report.router.mismatches, 0, "{report}");
    let snapshot = server.handle.snapshot().await.unwrap();
    assert!(snapshot.counters.transitions_superseded >= 3, "{:?}", snapshot.counters);
    assert_eq!(snapshot.counters.settle_timeouts, 0, "{:?}", snapshot.counters);
    server.stop().await;
}
