//! The network's part: a laggy, lossy run still places everyone through every transition, and
//! the same seed gives the same run.

use std::collections::BTreeSet;

use gatehouse_client_sim::session::SessionConfig;
use gatehouse_protocol::TransitionId;
use gatehouse_tests::sim::{Conditions, Sim, SimConfig, TraceEvent};

use crate::common::*;

/// A scripted session on a poor network: four clients through the boot, a late joiner, a
/// travel and back, a death and restart on the hazard, and one client dropping out mid-travel.
fn lossy_session(seed: u64) -> Sim {
    let mut config = SimConfig::new(HAZARDOUS, seed);
    config.net = Conditions::lossy();
    config.session = SessionConfig { restart_after_death: Some(ms(200)), ..config.session };
    let mut sim = Sim::new(config);
    let early: Vec<_> = ["ann", "bob", "cay", "dov"].into_iter().map(|n| sim.connect(n)).collect();
    sim.run_until("the boot placed everyone", secs(20), all_placed);
    sim.run_for(secs(1));
    let eve = sim.connect("eve");
    sim.run_until("eve placed", secs(10), all_placed);
    sim.travel("forest");
    sim.run_until("everyone placed on the forest", secs(20), all_placed);
    sim.travel("harbor");
    sim.run_for(ms(150));
    sim.disconnect(early[3]);
    sim.run_until("everyone left placed on the harbor", secs(20), all_placed);
    sim.run_until("someone died and respawned", secs(20), |s| {
        s.clients().any(|c| s.session(c).stats().respawns > 0)
    });
    sim.run_until("everyone placed again", secs(20), |s| {
        all_placed(s) && s.clients().all(|c| !s.is_open(c) || !s.session(c).is_dead_or_respawning())
    });
    let _ = eve;
    sim
}

/// A conditioned network (docs/testing.md, "A bad network") over the whole transition lifecycle
/// (docs/spec/transitions.md T3): with 60 ms of lag, 40 ms of jitter and one transmission in ten
/// lost (each retransmitted a timeout later, head-of-line blocking the stream), every transition
/// still ends with every player placed, none at the settle timeout, and no client sees a contract
/// broken.
#[test]
fn a_laggy_lossy_session_still_places_everyone() {
    let sim = lossy_session(71);
    assert!(sim.net_stats().retransmissions > 0, "some transmissions were lost");
    let counters = sim.game().counters();
    assert_eq!(counters.transitions_completed, 3, "boot, forest, harbor");
    assert_eq!(counters.settle_timeouts, 0);
    assert_eq!(counters.ready_timeouts, 0);
    assert!(counters.respawns >= 1);
    for client in sim.clients() {
        let ended = &sim.session(client).stats().transitions_ended;
        match sim.player(client).as_str() {
            "dov" => assert_eq!(ended, &BTreeSet::from([TransitionId(1), TransitionId(2)])),
            "eve" => assert_eq!(ended, &BTreeSet::from([TransitionId(2), TransitionId(3)])),
            _ => assert_eq!(ended, &BTreeSet::from([1, 2, 3].map(TransitionId))),
        }
        assert_clean(&sim, client);
    }
}

/// The same seed gives the same run: every delivery, input, timeout and output of a lossy session
/// happens at the same simulated instant, in the same order, in two runs with one seed; another
/// seed gives another run.
#[test]
fn the_same_seed_gives_the_same_run() {
    let trace = |seed| -> Vec<TraceEvent> { lossy_session(seed).trace().to_vec() };
    let first = trace(81);
    assert!(first.len() > 500, "a run worth comparing: {} events", first.len());
    assert!(first == trace(81), "one seed, one run");
    assert!(first != trace(82), "another seed, another run");
}
