//! The response timeout (issue 13 item 4): what needs no streaming (`TransitionShown` after
//! `ShowTransition`, `PossessionAcknowledged` after `Possessed`) must come within
//! `[game] client_response_timeout_ms`, or nothing waits for that client any more. A client
//! that does not answer is set aside from the transition and placed by a join of its own after
//! it; one that does not acknowledge is excused from placement. The longer timeouts still apply
//! the client-ready policy. Each behaviour is tested in both arrival orders.

use std::time::Duration;

use gatehouse_protocol::{ClientMessage, CloseCode, ErrorCode, ServerMessage, TransitionId};

use super::*;

/// The response timeout of these tests: short beside the other bounds (ready 30 s, settle 15 s).
const RESPONSE: Duration = Duration::from_millis(500);

fn responsive_rules() -> GameRules {
    GameRules { client_response_timeout: RESPONSE, ..rules() }
}

fn travel(h: &mut Harness, to: &str) -> TransitionId {
    h.input(Input::Travel { node: node(to) });
    h.transition()
}

/// `c` answers the transition in flight's `ShowTransition`.
fn answer(h: &mut Harness, c: ConnectionId) {
    let transition_id = h.transition();
    h.send(c, ClientMessage::TransitionShown { transition_id });
}

/// Booted, `a` and `b` placed on harbor, then a travel to forest streamed: WaitingForClients,
/// both shown the transition when it resolved.
fn two_placed_then_travel() -> (Harness, TransitionId, ConnectionId, ConnectionId) {
    let mut h = Harness::with(WORLD, responsive_rules());
    h.stream_node("harbor");
    let (a, b) = (h.placed("a"), h.placed("b"));
    let t = travel(&mut h, "forest");
    h.stream_node("forest");
    assert_eq!(h.game.snapshot().phase, "WaitingForClients");
    (h, t, a, b)
}

/// A client that does not answer `ShowTransition` within the response timeout is set aside:
/// the others are released at the response timeout, not the client-ready timeout; its pawn,
/// left on harbor, is withdrawn and its join follows the transition's end.
#[test]
fn a_client_that_does_not_answer_show_transition_is_set_aside_and_the_others_go_on() {
    let (mut h, t, a, b) = two_placed_then_travel();
    let b_pawn = h.possessed(b).expect("b's pawn on harbor");
    answer(&mut h, a);
    h.ready(a);
    h.advance(RESPONSE - Duration::from_millis(1));
    assert!(!h.ended(t), "b is waited for within the response timeout");
    h.advance(Duration::from_millis(1));
    assert!(h.ended(t), "released at the response timeout");
    assert_eq!(h.game.counters().clients_set_aside, 1);
    assert_eq!(h.closed(b), None, "set aside, not kicked");
    assert!(h.received(b).contains(&ServerMessage::PawnDestroyed { pawn_id: b_pawn }));
    assert_eq!(h.pawns_of("b"), 0, "nothing left on harbor");
    let joins =
        h.received(b).iter().filter(|m| matches!(m, ServerMessage::ShowJoin { .. })).count();
    assert_eq!(joins, 2, "a join of its own places it, after the one it logged in with");
    assert!(h.game.roster.pawns().all(|p| p.node == node("forest")));
    h.join_ready(b);
    h.ack(b);
    assert!(h.player("b").is_placed());
}

/// The other order: a client that answers in time is waited for until it reports ready, however
/// long it streams (up to the client-ready timeout), and keeps its pawn.
#[test]
fn a_client_that_answers_show_transition_in_time_is_waited_for() {
    let (mut h, t, a, b) = two_placed_then_travel();
    let b_pawn = h.possessed(b);
    answer(&mut h, a);
    h.ready(a);
    h.advance(RESPONSE / 2);
    answer(&mut h, b);
    h.advance(Duration::from_secs(5));
    assert!(!h.ended(t), "b streams slowly; it answered, so it is waited for");
    h.ready(b);
    assert!(h.ended(t));
    assert_eq!(h.possessed(b), b_pawn, "its pawn kept and teleported");
    assert_eq!(h.game.counters().clients_set_aside, 0);
}

/// A ready report is an answer too: a client that reports ready before the response timeout
/// without sending `TransitionShown` is not set aside.
#[test]
fn a_ready_report_answers_show_transition() {
    let (mut h, t, a, b) = two_placed_then_travel();
    h.ready(a);
    h.ready(b);
    assert!(h.ended(t));
    h.advance(RESPONSE * 2);
    assert_eq!(h.game.counters().clients_set_aside, 0);
}

/// A client set aside that reports ready while the transition still runs is back in: it is
/// waited for and placed again, with its own pawn teleported (nothing withdrawn).
#[test]
fn a_client_set_aside_that_reports_ready_comes_back_into_the_transition() {
    let (mut h, t, a, b) = two_placed_then_travel();
    let b_pawn = h.possessed(b);
    answer(&mut h, a);
    h.advance(RESPONSE);
    assert_eq!(h.game.counters().clients_set_aside, 1);
    assert!(!h.ended(t), "a has not reported ready yet");
    h.ready(b);
    assert_eq!(h.game.snapshot().phase, "WaitingForClients", "still waiting for a");
    h.ready(a);
    assert!(h.ended(t));
    assert_eq!(h.possessed(b), b_pawn, "its pawn teleported, not withdrawn");
    assert_eq!(h.game.counters().pawns_withdrawn, 0);
    let joins =
        h.received(b).iter().filter(|m| matches!(m, ServerMessage::ShowJoin { .. })).count();
    assert_eq!(joins, 1, "only the join it logged in with");
    assert!(!h.player("b").placement_excused);
}

/// A silent client set aside is kicked (kick policy) a client-ready timeout after it was set
/// aside, even when route travels come more often than that: each one sets it aside from the
/// start instead of asking it again, so its clock never resets and it holds nobody again.
#[test]
fn a_silent_client_is_kicked_a_ready_timeout_after_it_was_set_aside_despite_a_short_route() {
    let world = with_route(WORLD, &["forest", "harbor"], 2000);
    let mut r = responsive_rules();
    r.client_ready_timeout = Duration::from_secs(5);
    let mut h = Harness::with(&world, r);
    h.stream_node("harbor");
    let (a, b) = (h.placed("a"), h.placed("b"));
    h.advance(Duration::from_secs(2));
    let (first, first_start) = (h.transition(), h.now);
    h.stream_node("forest");
    answer(&mut h, a);
    h.ready(a);
    h.advance(RESPONSE);
    assert!(h.ended(first), "b set aside");
    let set_aside_at = h.now;
    // The route's next travels, every 2 s, each lasting past a response timeout: b is set aside
    // from their start, never asked again, so nothing waits for it and its clock runs on.
    for k in 1..3u32 {
        h.advance(first_start + Duration::from_secs(2) * k - h.now);
        let t = h.transition();
        let load = h.streams.last().map(|s| s.what.clone()).expect("the next node streams");
        h.finish_stream(&load);
        let points = h.game.streaming.streamed_load().expect("streamed");
        h.input(Input::SpawnPointsRegistered { load: points });
        answer(&mut h, a);
        h.advance(RESPONSE * 2);
        h.ready(a);
        assert!(h.ended(t), "b holds no later transition");
    }
    assert_eq!(h.game.counters().clients_set_aside, 1, "set aside once, never asked again");
    let kick_at = set_aside_at + Duration::from_secs(5);
    h.advance(kick_at - h.now - Duration::from_millis(1));
    assert_eq!(h.closed(b), None);
    h.advance(Duration::from_millis(1));
    assert_eq!(h.closed(b), Some(CloseCode::ReadyTimeout));
}

/// The other side: a client set aside that sends anything again is responsive, so the next
/// transition asks it again and waits for it.
#[test]
fn a_client_set_aside_that_speaks_again_is_waited_for_at_the_next_transition() {
    let (mut h, t, a, b) = two_placed_then_travel();
    answer(&mut h, a);
    h.ready(a);
    h.advance(RESPONSE);
    assert!(h.ended(t));
    h.join_ready(b);
    h.ack(b);
    let next = travel(&mut h, "harbor");
    h.stream_node("harbor");
    answer(&mut h, a);
    h.ready(a);
    assert!(!h.ended(next), "b is waited for again");
    answer(&mut h, b);
    h.advance(RESPONSE * 2);
    assert!(!h.ended(next), "it answered: waited for until it reports ready");
    h.ready(b);
    assert!(h.ended(next));
    assert_eq!(h.game.counters().clients_set_aside, 1);
    assert_eq!(h.closed(b), None);
}

/// A client that logs in after `ShowTransition` went out owes its answer from its own
/// `ShowTransition`: silent, it is set aside a response timeout after its login, not at the
/// others' deadline.
#[test]
fn a_late_joiners_response_timeout_counts_from_its_own_show_transition() {
    let (mut h, t, a, b) = two_placed_then_travel();
    answer(&mut h, a);
    answer(&mut h, b);
    h.advance(RESPONSE - Duration::from_millis(100));
    h.login("late");
    h.advance(Duration::from_millis(100));
    assert_eq!(h.game.counters().clients_set_aside, 0, "the others' deadline is not its own");
    h.advance(RESPONSE - Duration::from_millis(100) - Duration::from_millis(1));
    assert_eq!(h.game.counters().clients_set_aside, 0);
    h.advance(Duration::from_millis(1));
    assert_eq!(h.game.counters().clients_set_aside, 1, "set aside at its own deadline");
    assert!(!h.ended(t), "a and b have not reported ready");
}

/// The other order: a late joiner that answers its own `ShowTransition` in time is waited for.
#[test]
fn a_late_joiner_that_answers_in_time_is_waited_for() {
    let (mut h, t, a, b) = two_placed_then_travel();
    answer(&mut h, a);
    answer(&mut h, b);
    let late = h.login("late");
    answer(&mut h, late);
    h.ready(a);
    h.ready(b);
    h.advance(RESPONSE * 2);
    assert!(!h.ended(t), "the late joiner answered: it is waited for");
    assert_eq!(h.game.counters().clients_set_aside, 0);
    h.ready(late);
    h.ack(late);
    assert!(h.ended(t));
}

/// A silent joiner set aside without a pawn is excused from placement, so the settle-hold does
/// not wait for it; its pending spawn is dropped with it, so the queue does not either. Its join
/// follows the transition's end.
#[test]
fn a_silent_joiner_set_aside_holds_neither_the_barrier_nor_the_settle_hold() {
    let (mut h, t, a, b) = two_placed_then_travel();
    answer(&mut h, a);
    answer(&mut h, b);
    let late = h.login("late");
    assert_eq!(h.game.snapshot().pending_spawns.len(), 1, "its initial spawn is queued");
    h.ready(a);
    h.ready(b);
    assert!(!h.ended(t), "the joiner is waited for within the response timeout");
    h.advance(RESPONSE);
    assert!(h.ended(t), "set aside: neither its placement nor its spawn holds the transition");
    assert_eq!(h.game.counters().settle_timeouts, 0);
    assert!(h.shown_join(late).is_some(), "a join of its own follows");
}

/// A client set aside that reports ready during Completing (the settle-hold waits for a
/// joiner's acknowledgement) is back in: its kept pawn is teleported to the destination (its
/// spawn request queued when it came back), not left on the old level.
#[test]
fn a_client_back_in_during_completing_has_its_pawn_teleported() {
    let (mut h, t, a, b) = two_placed_then_travel();
    let b_pawn = h.possessed(b).expect("b's pawn on harbor");
    let c = h.login("c");
    for x in [a, c] {
        answer(&mut h, x);
        h.ready(x);
    }
    h.advance(RESPONSE);
    assert_eq!(h.game.counters().clients_set_aside, 1);
    assert_eq!(h.game.snapshot().phase, "Completing", "c's acknowledgement is awaited");
    h.ready(b);
    h.ack(c);
    assert!(h.ended(t));
    assert_eq!(h.possessed(b), Some(b_pawn), "its own pawn, kept");
    assert_eq!(h.game.roster.pawn(b_pawn).map(|p| p.node.clone()), Some(node("forest")));
    assert_eq!(h.game.counters().pawns_withdrawn, 0);
}

/// A client set aside that speaks again (its join placed it) and then is slow to acknowledge a
/// pawn is waited for again: the excuse of its set-aside ended with that transition.
#[test]
fn a_client_back_from_being_set_aside_is_waited_for_its_acknowledgement_again() {
    let (mut h, t, a, b) = two_placed_then_travel();
    answer(&mut h, a);
    h.ready(a);
    h.advance(RESPONSE);
    assert!(h.ended(t));
    assert!(!h.player("b").placement_excused, "the excuse ended with the transition");
    h.join_ready(b);
    let next = travel(&mut h, "harbor");
    h.stream_node("harbor");
    answer(&mut h, a);
    answer(&mut h, b);
    h.ready(a);
    h.ready(b);
    assert!(!h.ended(next), "b's acknowledgement of its join's pawn is awaited");
    h.ack(b);
    assert!(h.ended(next));
}

/// `TransitionShown` naming a superseded transition is ignored (stale); one naming a
/// transition never started is refused with `UnknownTransition`.
#[test]
fn a_stale_transition_shown_is_ignored_and_an_unknown_one_refused() {
    let (mut h, old, a, _b) = two_placed_then_travel();
    let _new = travel(&mut h, "harbor");
    let stale = h.game.counters().stale_ignored;
    h.send(a, ClientMessage::TransitionShown { transition_id: old });
    assert_eq!(h.game.counters().stale_ignored, stale + 1);
    h.send(a, ClientMessage::TransitionShown { transition_id: TransitionId(999) });
    let refused = h
        .received(a)
        .iter()
        .filter(|m| matches!(m, ServerMessage::Error { code: ErrorCode::UnknownTransition, .. }))
        .count();
    assert_eq!(refused, 1);
}

/// The boot transition in Completing with `a` placed and `b` possessed its pawn, not yet
/// acknowledged.
fn boot_with_b_possessed() -> (Harness, TransitionId, ConnectionId) {
    let mut h = Harness::with(WORLD, responsive_rules());
    let boot = h.transition();
    let (a, b) = (h.login("a"), h.login("b"));
    h.stream_node("harbor");
    h.ready(a);
    h.ready(b);
    h.ack(a);
    (h, boot, b)
}

/// A possession not acknowledged within the response timeout no longer holds the settle-hold:
/// the transition ends then, and the settle timeout still kicks the client later (kick policy).
#[test]
fn a_possession_not_acknowledged_in_time_no_longer_holds_the_settle_hold() {
    let (mut h, boot, b) = boot_with_b_possessed();
    h.advance(RESPONSE - Duration::from_millis(1));
    assert!(!h.ended(boot), "b's acknowledgement is awaited within the response timeout");
    h.advance(Duration::from_millis(1));
    assert!(h.ended(boot), "released at the response timeout, not the settle timeout");
    assert_eq!(h.game.counters().acknowledgements_late, 1);
    assert_eq!(h.game.counters().settle_timeouts, 0);
    assert_eq!(h.closed(b), None);
    h.advance(rules().spawn_settle_timeout - RESPONSE);
    assert_eq!(h.closed(b), Some(CloseCode::ReadyTimeout), "the settle timeout still applies");
}

/// The other order: an acknowledgement within the response timeout ends the transition at once
/// and nothing is excused.
#[test]
fn a_possession_acknowledged_in_time_ends_the_transition_at_once() {
    let (mut h, boot, b) = boot_with_b_possessed();
    h.advance(RESPONSE - Duration::from_millis(1));
    h.ack(b);
    assert!(h.ended(boot));
    h.advance(rules().spawn_settle_timeout);
    assert_eq!(h.game.counters().acknowledgements_late, 0);
    assert!(!h.player("b").placement_excused);
    assert_eq!(h.closed(b), None);
}
