//! Placed means acknowledged (docs/spec/transitions.md T8): the server counts a player as placed
//! only once its client's `PossessionAcknowledged` arrives, so the loading screen never drops onto
//! an unpossessed camera, and a client that never acknowledges cannot hold a transition forever.

use gatehouse_protocol::{ClientMessage, CloseCode, TransitionId};
use gatehouse_tests::sim::{Conditions, Sim, SimConfig};

use crate::common::*;

/// The plain world with the response timeout above the settle timeout, so a held
/// acknowledgement is waited for by the settle-hold itself (protocol version 5 otherwise excuses
/// it after `client_response_timeout_ms`, tested in the core's `responses` tests).
fn acknowledgements_waited_for(seed: u64) -> SimConfig {
    let mut config = SimConfig::new(PLAIN, seed);
    config.rules.client_response_timeout = secs(60);
    config
}

/// No camera left unpossessed after a transition: the settle-hold waits for placement
/// (docs/spec/transitions.md T7), and placed means acknowledged (T8): the transition does not end
/// while the acknowledgement is still on its way, and ends in the step it arrives.
#[test]
fn a_client_is_placed_only_after_its_acknowledgement_arrives() {
    let mut sim = Sim::new(acknowledgements_waited_for(11));
    let ann = sim.connect("ann");
    let ack = sim.hold_to_server(ann, is_ack);
    sim.run_until("ann's pawn possessed", secs(5), |s| s.session(ann).own_pawn().is_some());
    let boot = TransitionId(1);

    // Acknowledged on the client; the acknowledgement has not reached the server.
    sim.run_for(secs(3));
    assert_eq!(sim.held_count(ack), 1, "the acknowledgement is held");
    let snapshot = sim.game().snapshot();
    assert_eq!(snapshot.phase, "Completing", "the settle-hold holds");
    assert_eq!(snapshot.transition_id, Some(boot));
    assert_eq!(snapshot.unplaced_players, vec![sim.player(ann).clone()]);
    assert!(sim.output_at(is_end_output(boot)).is_none(), "no EndTransition while unacknowledged");
    assert!(sim.session(ann).is_loading(), "the loading screen stays up");

    sim.release(ack);
    sim.run_until("ann placed", secs(1), |s| s.session(ann).is_placed());
    let acknowledged = sim.arrived_at_server(ann, is_ack).expect("the acknowledgement arrived");
    let ended = sim.output_at(is_end_output(boot)).expect("the boot transition ended");
    assert_eq!(ended, acknowledged, "the transition ends in the step its last player is placed");
    assert_eq!(sim.game().counters().transitions_completed, 1);
    assert_eq!(sim.game().counters().settle_timeouts, 0);
    assert_clean(&sim, ann);
}

/// docs/spec/transitions.md T7 and T8 (no camera left unpossessed after a transition): with two
/// clients, the transition waits for the slower acknowledgement, here one carried by a slow uplink
/// (not a hold).
#[test]
fn a_transition_ends_only_after_the_slowest_acknowledgement_arrives() {
    let mut sim = Sim::new(SimConfig::new(PLAIN, 12));
    let ann = sim.connect("ann");
    let bob = sim.connect("bob");
    sim.run_until("both logged in", secs(1), |s| s.game().snapshot().players.len() == 2);
    sim.set_uplink(bob, Conditions { latency: ms(700), ..Conditions::lan() });
    sim.run_until("both placed, bob's acknowledgement arrived", secs(10), |s| {
        all_placed(s) && s.arrived_at_server(bob, is_ack).is_some()
    });

    let boot = TransitionId(1);
    let ended = sim.output_at(is_end_output(boot)).expect("the boot transition ended");
    let bob_possessed = sim.received_at(bob, is_possessed).expect("bob possessed");
    let bob_acknowledged = sim.arrived_at_server(bob, is_ack).expect("bob's acknowledgement");
    let ann_acknowledged = sim.arrived_at_server(ann, is_ack).expect("ann's acknowledgement");
    assert!(bob_acknowledged >= bob_possessed + ms(700), "bob's uplink is slow");
    assert!(ann_acknowledged < bob_acknowledged, "ann acknowledged first");
    assert_eq!(ended, bob_acknowledged, "the end waited for bob's acknowledgement");
    for client in [ann, bob] {
        assert_clean(&sim, client);
    }
}

/// docs/spec/transitions.md T9, no client can wedge a transition (the settle timeout of T7, 15 s):
/// a client that never acknowledges its pawn is kicked at the settle timeout under the kick policy,
/// and the others' loading screens drop then, with them placed.
#[test]
fn a_client_that_never_acknowledges_is_kicked_at_the_settle_timeout() {
    let mut sim = Sim::new(acknowledgements_waited_for(13));
    let ann = sim.connect("ann");
    let bob = sim.connect("bob");
    let _never = sim.hold_to_server(bob, is_ack);
    sim.run_until("both possessed", secs(5), |s| {
        s.session(ann).own_pawn().is_some() && s.session(bob).own_pawn().is_some()
    });
    let completing = sim.elapsed();
    sim.run_until("ann placed", secs(20), |s| s.session(ann).is_placed());

    assert!(sim.elapsed() - completing >= secs(14), "held until the settle timeout");
    sim.run_until("bob's close", secs(1), |s| !s.is_open(bob));
    assert_eq!(sim.close_code(bob), Some(CloseCode::ReadyTimeout));
    assert_eq!(sim.game().counters().settle_timeouts, 1);
    assert_eq!(sim.game().snapshot().players.len(), 1, "only ann is left");
    assert!(
        !sim.sent(bob).iter().any(|m| matches!(m, ClientMessage::RestartRequest)),
        "bob only ever acknowledged"
    );
    assert_clean(&sim, ann);
}
