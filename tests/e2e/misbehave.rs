//! The misbehaving-clients run (docs/testing.md, "Misbehaving clients"), small enough for a debug
//! build: 40 simulated clients of which a fifth misbehave (restart spam, stale and unknown ids,
//! garbage and oversized frames, never acknowledging, going silent), on the load world (a travel
//! every 3 s), for 15 s. The 200-client benchmark against a run without them is
//! `deploy/misbehave.sh`.

use std::collections::BTreeSet;
use std::time::Duration;

use gatehouse_client_sim::misbehaviour::Misbehaviour;
use gatehouse_client_sim::report::SwarmReport;
use gatehouse_client_sim::swarm::run_swarm_outcomes;
use gatehouse_protocol::CloseCode;
use gatehouse_tests::{TestServer, within, worlds};

/// Every client dials from 127.0.0.1; the timeouts that kick a silent client and one that
/// never acknowledges are 2 s, so they fit the run; the response timeout, after which nothing
/// waits for them, is 1.5 s (generous for a debug build beside other tests), cut by the crowd
/// rule to twice the crowd's answer time but not below 300 ms, so the rule runs end to end
/// and must set aside no well-behaved client.
const SERVER: &str = "[network]\nmax_players = 128\nmax_pending_per_ip = 128\n\
    [game]\nclient_ready_timeout_ms = 2000\nspawn_settle_timeout_ms = 2000\n\
    client_response_timeout_ms = 1500\nclient_response_crowd_floor_ms = 300\n";

/// No client can wedge a transition (docs/spec/transitions.md T9): among 8 misbehaving clients of
/// 40, every well-behaved client is placed at every transition from the first it saw end to the
/// last (none ends before its pawn is acknowledged), with no error and every invariant counter 0;
/// no transition fails. Each misbehaving client gets what the protocol says: restart spam is closed
/// as abuse, a garbage or oversized frame as a protocol violation, a silent client and one that
/// never acknowledges are kicked at the client-ready and settle timeouts (`ReadyTimeout`), and
/// stale and unknown ids are refused (`UnknownTransition`, `UnknownPawn`, `UnknownJoin`) without a
/// close. The guards this pins: a silent client is set aside and one that never acknowledges is
/// excused at the response timeout (protocol version 5), so neither holds a transition to its
/// settle timeout; both are kicked later, and no well-behaved client is set aside (it would then
/// see a transition end before it was placed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn well_behaved_clients_are_placed_at_every_transition_among_misbehaving_ones() {
    let server = TestServer::start_with(SERVER, worlds::LOAD).await;
    let mut swarm = server.swarm(40, 0, Duration::from_secs(15));
    swarm.full_clients = 8;
    swarm.misbehaving = 8;
    swarm.connect_rate = Some(100.0);
    swarm.session.stream_time = (Duration::ZERO, Duration::ZERO);
    swarm.settle_grace = Duration::from_secs(10);
    let outcomes = within(Duration::from_secs(90), "the swarm of 40", run_swarm_outcomes(swarm))
        .await
        .unwrap();
    let report = SwarmReport::from_outcomes(&outcomes);
    let problems = report.problems();
    assert!(problems.is_empty(), "{problems:?}\n{report}");
    assert_eq!((report.clients, report.misbehaving.clients), (32, 8), "{report}");
    assert!(report.transitions_completed >= 3, "{report}");

    // The well-behaved: placed at every transition they were in.
    let well: Vec<_> = outcomes.iter().filter(|o| o.misbehaviour.is_none()).collect();
    let all: BTreeSet<_> =
        well.iter().flat_map(|o| o.stats.transitions_ended.iter().copied()).collect();
    for o in &well {
        let ended = &o.stats.transitions_ended;
        let (Some(first), Some(last)) = (ended.first(), ended.last()) else {
            panic!("client {} saw no transition end\n{report}", o.index);
        };
        let missed: Vec<_> = all.range(first..=last).filter(|t| !ended.contains(t)).collect();
        assert!(missed.is_empty(), "client {} missed the ends of {missed:?}\n{report}", o.index);
        assert!(ended.len() >= 3, "client {} saw {} ends\n{report}", o.index, ended.len());
        assert!(o.placed && o.stats.ended_before_placed == 0, "client {}\n{report}", o.index);
    }

    // The misbehaving: what the protocol answers each kind.
    for o in outcomes.iter().filter(|o| o.misbehaviour.is_some()) {
        let kind = o.misbehaviour.unwrap();
        assert!(o.connected, "client {} ({kind}) was welcomed\n{report}", o.index);
        let expected = match kind {
            Misbehaviour::RestartSpam => Some(CloseCode::Abuse),
            Misbehaviour::StaleIds => None,
            Misbehaviour::GarbageFrame | Misbehaviour::OversizedFrame => {
                Some(CloseCode::ProtocolViolation)
            }
            Misbehaviour::NeverAcknowledge | Misbehaviour::Silent => Some(CloseCode::ReadyTimeout),
            other => panic!("a kind this test does not know: {other}"),
        };
        assert_eq!(o.server_close, expected, "client {} ({kind}): {:?}", o.index, o.errors);
    }
    let kinds = &report.misbehaving.kinds;
    let spam = &kinds["restart-spam"].server_errors;
    assert!(spam["RestartRejected"] >= 1 && spam["RateLimited"] >= 1, "{report}");
    let stale = &kinds["stale-ids"].server_errors;
    for code in ["UnknownTransition", "UnknownPawn"] {
        assert!(stale.get(code).is_some_and(|n| *n >= 1), "{code}\n{report}");
    }
    assert_eq!(kinds["stale-ids"].closes["none"], 2, "{report}");

    let counters = server.handle.snapshot().await.unwrap().counters;
    assert_eq!(counters.ready_timeouts, 2, "the silent client and the unacknowledging one");
    assert!(counters.clients_set_aside >= 1, "the silent client: {counters:?}");
    assert!(counters.acknowledgements_late >= 1, "the unacknowledging one: {counters:?}");
    assert_eq!(counters.settle_timeouts, 0, "nothing waits for them that long: {counters:?}");
    assert_eq!(counters.transitions_failed, 0, "{counters:?}");
    server.stop().await;
}
