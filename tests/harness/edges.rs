//! The edges of the contract (docs/spec/sessions.md), across both sides: a joiner streams before
//! its pawn exists, nothing comes before `Welcome`, a relaunch reports ready for itself and keeps
//! its death.

use gatehouse_protocol::{ClientMessage, ServerMessage};
use gatehouse_tests::sim::{Sim, SimConfig};

use crate::common::*;

fn is_join_ready(m: &ClientMessage) -> bool {
    matches!(m, ClientMessage::JoinReady { .. })
}

/// docs/spec/sessions.md S5 and docs/spec/transitions.md T1 (a pawn must never appear before the
/// level it stands on, on any machine): a player who logs in while no transition runs is told the
/// node's levels, streams them, and only then gets its pawn; the player already in the world is not
/// frozen; the joiner's checks find no pawn on a node it had not streamed.
#[test]
fn a_late_joiner_streams_before_its_pawn_exists() {
    let mut sim = Sim::new(SimConfig::new(PLAIN, 31));
    let ann = sim.connect("ann");
    sim.run_until("ann placed", secs(10), all_placed);
    let ann_messages = sim.received(ann).len();
    let bob = sim.connect("bob");
    sim.run_until("bob placed", secs(10), |s| all_placed(s) && s.session(bob).is_placed());

    let shown = sim.received_at(bob, |m| matches!(m, ServerMessage::ShowJoin { .. }));
    let reported = sim.arrived_at_server(bob, is_join_ready).expect("bob reported its join");
    let possessed = sim.received_at(bob, is_possessed).expect("bob possessed");
    let ended = sim.received_at(bob, |m| matches!(m, ServerMessage::EndJoin { .. }));
    assert!(shown.is_some_and(|at| at < reported), "shown, then streamed");
    assert!(reported < possessed, "the pawn came after the report");
    assert!(ended.is_some_and(|at| at >= possessed), "the join ends after its pawn");
    assert_eq!(sim.session(bob).stats().pawns_on_unloaded_node, 0);
    assert_eq!(sim.session(bob).stats().joins, 1);
    let frozen = sim.received(ann)[ann_messages..]
        .iter()
        .any(|m| matches!(m, ServerMessage::FreezeCharacters { .. }));
    assert!(!frozen, "ann is not frozen for bob's join");
    assert_clean(&sim, ann);
    assert_clean(&sim, bob);
}

/// docs/spec/sessions.md S2, nothing before `Welcome`: a relaunch's first frame is its `Welcome`,
/// although the server broadcast its old pawn's `PawnDestroyed` and its own `PlayerLeft` in the
/// same step.
#[test]
fn a_relaunch_gets_welcome_before_anything_else() {
    let mut sim = Sim::new(SimConfig::new(PLAIN, 32));
    let old = sim.connect("ann");
    sim.run_until("ann placed", secs(10), all_placed);
    let new = sim.connect("ann");
    sim.run_until("the relaunch placed", secs(10), |s| s.session(new).is_placed());
    assert!(!sim.is_open(old));
    let first = sim.received(new).first().copied().cloned();
    assert!(matches!(first, Some(ServerMessage::Welcome { .. })), "first frame: {first:?}");
    assert_clean(&sim, new);
}

/// A relaunch during WaitingForClients (docs/protocol.md 4.2, 4.3): its old connection's
/// report does not count for it, and the transition does not wait for a new one (an arrival):
/// it ends on bob's report, and the relaunch is placed all the same, in the spawn window or by a
/// join of its own.
#[test]
fn a_relaunch_during_waiting_for_clients_is_an_arrival_and_is_placed() {
    let mut sim = Sim::new(SimConfig::new(PLAIN, 33));
    let ann = sim.connect("ann");
    let bob = sim.connect("bob");
    sim.run_until("both placed", secs(10), all_placed);
    let bob_ready = sim.hold_to_server(bob, |m| matches!(m, ClientMessage::TransitionReady { .. }));
    sim.travel("forest");
    let id = current_transition(&sim);
    sim.run_until("ann reported ready", secs(10), |s| {
        s.game().snapshot().phase == "WaitingForClients"
            && s.sent(ann).iter().any(|m| matches!(m, ClientMessage::TransitionReady { .. }))
    });
    let ann_again = sim.connect("ann");
    sim.run_for(ms(20));
    let awaited = sim.game().snapshot().awaited_reports;
    assert_eq!(awaited, vec![sim.player(bob).clone()], "only bob's report is awaited");
    sim.release(bob_ready);
    sim.run_until("everyone placed", secs(20), |s| {
        all_placed(s) && s.session(ann_again).is_placed()
    });
    let end = sim.output_at(is_end_output(id)).expect("the transition ended");
    let bob_ready = sim.arrived_at_server(bob, is_ready_for(id)).expect("bob reported");
    assert!(end >= bob_ready, "it ended on bob's report");
    assert_clean(&sim, ann_again);
    assert_clean(&sim, bob);
}
