//! The scale run (docs/performance.md, "The load benchmark"), small enough for a debug build: 64
//! simulated clients, 8 of them full, dialling at 100 per second, on a zero-stream world that
//! travels every 3 s, for 15 s. The release-build short version (200 clients, 20 s) is `.ci/scale`;
//! the thousand-client run and the load benchmark are `deploy/load.sh`.

use std::collections::BTreeSet;
use std::time::Duration;

use gatehouse_client_sim::report::SwarmReport;
use gatehouse_client_sim::swarm::run_swarm_outcomes;
use gatehouse_tests::{TestServer, within, worlds};

/// The server settings for a swarm on one address.
const SCALE_SERVER: &str = "[network]\nmax_players = 128\nmax_pending_per_ip = 128\n";

/// Every client, thin or full, is connected, follows every transition from the first it saw
/// to the last, is placed at each end (no end before its pawn was acknowledged) and at the end
/// of the run, with no error and every must-be-0 figure 0; the full clients' gates open without
/// a violation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_four_mostly_thin_clients_are_placed_after_every_transition() {
    // Every client dials from 127.0.0.1: allow them all to be pending at once.
    let server = TestServer::start_with(SCALE_SERVER, worlds::LOAD).await;
    let mut swarm = server.swarm(64, 0, Duration::from_secs(15));
    swarm.full_clients = 8;
    swarm.connect_rate = Some(100.0);
    swarm.session.stream_time = (Duration::ZERO, Duration::ZERO);
    swarm.settle_grace = Duration::from_secs(10);
    let outcomes = within(Duration::from_secs(90), "the swarm of 64", run_swarm_outcomes(swarm))
        .await
        .unwrap();
    let report = SwarmReport::from_outcomes(&outcomes);
    let problems = report.problems();
    assert!(problems.is_empty(), "{problems:?}\n{report}");
    assert_eq!((report.thin_clients, report.full_clients), (56, 8), "{report}");
    assert!(report.transitions_completed >= 3, "{report}");
    let all: BTreeSet<_> =
        outcomes.iter().flat_map(|o| o.stats.transitions_ended.iter().copied()).collect();
    // From the first transition a client saw end to the last (it may leave before one that
    // others, still settling, saw), it saw every end.
    for o in &outcomes {
        let ended = &o.stats.transitions_ended;
        let (Some(first), Some(last)) = (ended.first(), ended.last()) else {
            panic!("client {} saw no transition end\n{report}", o.index);
        };
        let missed: Vec<_> = all.range(first..=last).filter(|t| !ended.contains(t)).collect();
        assert!(missed.is_empty(), "client {} missed the ends of {missed:?}\n{report}", o.index);
        assert!(ended.len() >= 3, "client {} saw {} ends\n{report}", o.index, ended.len());
    }
    assert!(report.timings.connect_to_welcome.count >= 64, "{report}");
    assert!(report.timings.connect_to_handshake.count >= 64, "{report}");
    assert!(report.gates.local_ready_opened >= 8, "{report}");
    assert_eq!(report.gates.gate_violations, 0, "{report}");
    server.stop().await;
}
