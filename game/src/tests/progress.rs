//! Progress (docs/protocol.md 4.2, "Progress"): once a transition waits for its clients, the
//! players it waits for only leave the set. A login then, first or again (a relaunch, a
//! reconnect that replaces its connection), is an arrival; the settle-hold is extended only by
//! the transition's own loads; a recovery travel does not wait for what held the transition
//! that failed. The other side of the boundary, a relaunch while the server loads, waited for
//! again, is `edges.rs`' `a_relaunch_while_the_server_loads_reports_ready_for_itself`.

use gatehouse_protocol::{ClientMessage, TransitionId};

use super::arrivals::completing_with;
use super::*;
use crate::model::LoadOutcome;

/// A booted harness with `a` and `b` placed, travelling to the forest; the server streamed it,
/// so the transition waits for its clients. Returns the harness, the transition, `a` and `b`.
fn waiting_for_a_and_b() -> (Harness, TransitionId, ConnectionId, ConnectionId) {
    let mut h = Harness::booted();
    let a = h.placed("a");
    let b = h.placed("b");
    h.input(Input::Travel { node: node("forest") });
    let t = h.transition();
    h.stream_node("forest");
    assert_eq!(h.game.snapshot().phase, "WaitingForClients");
    (h, t, a, b)
}

/// The node of `name`'s possessed pawn, if it has one.
fn pawn_node(h: &Harness, name: &str) -> Option<NodeId> {
    h.game.roster.possessed_pawn(&pid(name)).map(|p| p.node.clone())
}

/// Places `c` through the join it was shown after the end, and checks it has one pawn.
fn placed_by_its_join(h: &mut Harness, c: ConnectionId, name: &str) {
    assert!(h.shown_join(c).is_some(), "{name} gets a join of its own after EndTransition");
    h.join_ready(c);
    h.ack(c);
    assert!(h.player(name).is_placed(), "its join placed {name}");
    assert_eq!(h.pawns_of(name), 1);
}

/// A relaunch once the transition waits for its clients is an arrival: the barrier does not
/// wait for its new report, the transition ends on the others', and a join places it.
#[test]
fn a_relaunch_once_clients_are_awaited_is_an_arrival() {
    let (mut h, t, a, b) = waiting_for_a_and_b();
    h.disconnect(b);
    let again = h.login("b");
    assert!(h.game.transition.is_arrival(&pid("b")));
    h.ready(a);
    assert!(h.ended(t), "a's report was the last one awaited");
    placed_by_its_join(&mut h, again, "b");
}

/// The same relaunch reporting before the barrier: it is spawned in the window on its own
/// report, and its acknowledgement is not awaited.
#[test]
fn a_relaunch_once_clients_are_awaited_that_reports_in_time_is_spawned_in_the_window() {
    let (mut h, t, a, b) = waiting_for_a_and_b();
    h.disconnect(b);
    let again = h.login("b");
    h.ready(again);
    h.ready(a);
    assert!(h.ended(t), "nothing waits for the relaunch's acknowledgement");
    assert_eq!(pawn_node(&h, "b"), Some(node("forest")), "spawned in the window");
    h.ack(again);
    assert!(h.player("b").is_placed() && h.shown_join(again).is_none());
}

/// A reconnect that replaces a connection still open (the old one is closed `Replaced`) is a
/// relaunch too: an arrival once clients are awaited.
#[test]
fn a_reconnect_replacing_its_connection_once_clients_are_awaited_is_an_arrival() {
    let (mut h, t, a, b) = waiting_for_a_and_b();
    let again = h.login("b");
    assert_eq!(h.closed(b), Some(CloseCode::Replaced));
    assert!(h.game.transition.is_arrival(&pid("b")));
    h.ready(a);
    assert!(h.ended(t));
    placed_by_its_join(&mut h, again, "b");
}

/// A relaunch in the spawn window is an arrival: the transition ends on the acknowledgement of
/// the last player it waits for, not on the relaunch's report, and a join places the relaunch.
#[test]
fn a_relaunch_in_the_spawn_window_is_an_arrival() {
    let (mut h, t, a, b) = completing_with(rules());
    h.disconnect(a);
    let again = h.login("a");
    assert!(h.game.transition.is_arrival(&pid("a")));
    h.ack(b);
    assert!(h.ended(t), "b was the last one awaited: the relaunch is not waited for");
    placed_by_its_join(&mut h, again, "a");
}

/// The same relaunch reporting ready in the window: spawned there on its own report, and the
/// transition does not wait for its acknowledgement.
#[test]
fn a_relaunch_in_the_spawn_window_that_reports_is_spawned_in_it() {
    let (mut h, t, a, b) = completing_with(rules());
    h.disconnect(a);
    let again = h.login("a");
    h.ready(again);
    assert_eq!(pawn_node(&h, "a"), Some(node("forest")), "spawned in the window");
    h.ack(b);
    assert!(h.ended(t), "b was the last one awaited; the relaunch's acknowledgement is not");
    h.ack(again);
    assert!(h.player("a").is_placed() && h.shown_join(again).is_none());
}

/// Relaunches one after another cannot move the client-ready deadline: it stays the phase's
/// start plus the timeout, and there the players still owing a report meet the policy (kick)
/// and the transition moves on, whatever relaunched meanwhile.
#[test]
fn a_stream_of_relaunches_cannot_hold_the_transition_past_its_client_ready_deadline() {
    let (mut h, t, a, mut b) = waiting_for_a_and_b();
    let timeout = rules().client_ready_timeout;
    let deadline = h.now + timeout;
    for _ in 0..10 {
        h.advance(timeout / 20);
        h.disconnect(b);
        b = h.login("b");
    }
    h.advance(deadline - h.now - Duration::from_millis(1));
    assert!(!h.ended(t) && h.closed(a).is_none(), "a's deadline has not come yet");
    h.advance(Duration::from_millis(1));
    assert_eq!(h.closed(a), Some(CloseCode::ReadyTimeout), "a never reported: kicked");
    assert!(h.ended(t), "the relaunches did not move the deadline");
    placed_by_its_join(&mut h, b, "b");
}

/// The placements awaited only leave the set once the spawn window is open: a dead arrival
/// (a relaunch of a dead player once clients are awaited) reports ready, is spawned dead in the
/// window, acknowledges, and restarts there; its respawn is placed, but not waited for (found by
/// review: the acknowledgement lifted the arrival's excuse, and the respawn then held the
/// transition until its settle timeout).
#[test]
fn a_dead_arrival_that_restarts_in_the_spawn_window_is_not_waited_for() {
    let mut h = Harness::booted();
    let a = h.placed("a");
    let c = h.placed("c");
    h.kill("c");
    h.input(Input::Travel { node: node("forest") });
    let t = h.transition();
    let b = h.login("b");
    h.stream_node("forest");
    for x in [a, b, c] {
        h.ready(x);
    }
    assert_eq!(h.game.snapshot().phase, "Completing", "b's acknowledgement is awaited");
    h.disconnect(c);
    let again = h.login("c");
    assert!(h.game.transition.is_arrival(&pid("c")) && h.player("c").is_dead());
    h.ready(again);
    let dead = h.possessed(again).expect("spawned dead in the window on its own report");
    h.ack(again);
    h.send(again, ClientMessage::RestartRequest);
    let fresh = h.possessed(again).expect("respawned in the window");
    assert_ne!(fresh, dead);
    h.ack(b);
    assert!(h.ended(t), "b was the last placement awaited; the respawn's is not");
    h.ack(again);
    assert!(h.player("c").is_placed() && h.closed(again).is_none());
}

/// The same for a player the transition had placed (a dead one, its dead pawn kept): its
/// restart in the window is respawned there, and not waited for.
#[test]
fn a_placed_dead_player_that_restarts_in_the_spawn_window_is_not_waited_for() {
    let mut h = Harness::booted();
    let a = h.placed("a");
    let c = h.placed("c");
    h.kill("c");
    h.input(Input::Travel { node: node("forest") });
    let t = h.transition();
    let b = h.login("b");
    h.stream_node("forest");
    for x in [a, b, c] {
        h.ready(x);
    }
    assert_eq!(h.game.snapshot().phase, "Completing", "b's acknowledgement is awaited");
    assert!(h.player("c").is_placed(), "its dead pawn kept, and acknowledged before");
    h.send(c, ClientMessage::RestartRequest);
    assert!(h.possessed(c).is_some_and(|p| h.game.roster.pawn(p).is_some_and(|p| p.alive)));
    h.ack(b);
    assert!(h.ended(t), "the respawn's acknowledgement is not awaited");
    h.ack(c);
    assert!(h.player("c").is_placed());
}

/// A client set aside (it did not answer `ShowTransition` in time) that reports ready once the
/// spawn window is open is back in: spawned in the window, but not waited for. Before the
/// window opens, it would be waited for again (`responses.rs`).
#[test]
fn a_client_set_aside_that_reports_in_the_spawn_window_is_placed_but_not_waited_for() {
    let response = Duration::from_millis(500);
    let mut h = Harness::with(WORLD, GameRules { client_response_timeout: response, ..rules() });
    let boot = h.transition();
    h.stream_node("harbor");
    assert!(h.ended(boot));
    let a = h.placed("a");
    h.input(Input::Travel { node: node("forest") });
    let t = h.transition();
    let (b, c) = (h.login("b"), h.login("c"));
    h.stream_node("forest");
    for x in [a, b] {
        h.send(x, ClientMessage::TransitionShown { transition_id: t });
        h.ready(x);
    }
    h.advance(response);
    assert!(h.game.transition.is_set_aside(&pid("c")), "c did not answer in time");
    assert_eq!(h.game.snapshot().phase, "Completing", "b's acknowledgement is awaited");
    h.ready(c);
    assert!(h.possessed(c).is_some(), "spawned in the window on its report");
    h.ack(b);
    assert!(h.ended(t), "c's acknowledgement is not awaited");
    h.ack(c);
    assert!(h.player("c").is_placed());
}

/// A booted harness whose loads wait for the test, travelling to the forest in Completing:
/// `a` placed, `b` (logged in while the server loaded) possessed and not acknowledged.
fn completing_holding_loads() -> (Harness, TransitionId, ConnectionId) {
    let mut h = Harness::booted_holding_loads();
    let a = h.placed_answering_load("a");
    h.input(Input::Travel { node: node("forest") });
    let t = h.transition();
    let b = h.login("b");
    h.answer_load("b", LoadOutcome::NotFound);
    h.stream_node("forest");
    h.ready(a);
    h.ready(b);
    assert_eq!(h.game.snapshot().phase, "Completing");
    assert!(h.possessed(b).is_some() && !h.player("b").is_placed());
    (h, t, b)
}

/// The settle-hold is extended only by loads the transition waits for: the save of an
/// arrival (a login once the transition waits for its clients, here in the spawn window) is
/// not one, so at the settle deadline the transition ends on time with `b` unplaced.
#[test]
fn an_arrivals_save_does_not_extend_the_settle_hold() {
    let (mut h, t, _b) = completing_holding_loads();
    let late = h.login("late");
    h.ready(late);
    assert!(h.game.snapshot().load_in_flight, "the arrival's save is still loading");
    h.advance(rules().spawn_settle_timeout);
    assert!(h.ended(t), "ended at the settle deadline, not held for the arrival's save");
    assert_eq!(h.game.counters().settle_extensions, 0);
    assert_eq!(h.game.counters().settle_timeouts, 1);
    h.answer_load("late", LoadOutcome::NotFound);
    placed_by_its_join(&mut h, late, "late");
}

/// The same for a relaunch in the window of a player the transition waited for: its new save
/// does not extend the settle-hold either.
#[test]
fn a_relaunchs_save_does_not_extend_the_settle_hold() {
    let (mut h, t, _b) = completing_holding_loads();
    let a = h.game.roster.connection_of(&pid("a")).expect("a is logged in");
    h.disconnect(a);
    let again = h.login("a");
    h.advance(rules().spawn_settle_timeout);
    assert!(h.ended(t), "ended at the settle deadline, not held for the relaunch's save");
    assert_eq!(h.game.counters().settle_extensions, 0);
    h.answer_load("a", LoadOutcome::NotFound);
    placed_by_its_join(&mut h, again, "a");
}

/// A transition that fails at its hard maximum while waiting for a client (its client-ready
/// timeout is longer than the maximum) travels back, and the recovery does not wait for that
/// client again: it is set aside from the start, and the recovery ends on the others.
#[test]
fn a_recovery_travel_does_not_wait_for_the_players_that_held_the_failed_one() {
    let long_ready = GameRules { client_ready_timeout: Duration::from_secs(200), ..rules() };
    let mut h = Harness::with(WORLD, long_ready);
    let boot = h.transition();
    h.stream_node("harbor");
    assert!(h.ended(boot));
    let a = h.placed("a");
    let b = h.placed("b");
    h.input(Input::Travel { node: node("forest") });
    let t = h.transition();
    h.stream_node("forest");
    h.send(b, ClientMessage::TransitionShown { transition_id: t });
    h.ready(a);
    h.advance(rules().transition_max);
    assert_eq!(h.game.counters().transitions_failed, 1, "b's report held it to the maximum");
    let recovery = h.transition();
    assert_ne!(recovery, t);
    assert!(h.game.transition.is_set_aside(&pid("b")), "b held the failed one: set aside");
    h.stream_node("harbor");
    h.ready(a);
    assert!(h.ended(recovery), "the recovery did not wait for b");
    assert_eq!(h.game.counters().transitions_failed, 1);
    assert!(h.closed(b).is_none(), "b is not kicked before its own client-ready timeout");
}
