//! The response timeout (docs/spec/transitions.md T9): what needs no streaming (`TransitionShown`
//! after `ShowTransition`, `PossessionAcknowledged` after `Possessed`) must come within `[game]
//! client_response_timeout_ms`, or nothing waits for that client any more. A client that does not
//! answer is set aside from the transition and placed by a join of its own after it; one that does
//! not acknowledge is excused from placement. The longer timeouts still apply the client-ready
//! policy. Each behaviour is tested in both arrival orders.

use std::time::Duration;

use gatehouse_protocol::{ClientMessage, CloseCode, ErrorCode, ServerMessage, TransitionId};

use crate::ClientReadyPolicy;

use super::*;

/// The response timeout of these tests: short beside the other bounds (ready 30 s, settle 15 s).
const RESPONSE: Duration = Duration::from_millis(500);

fn responsive_rules() -> GameRules {
    GameRules { client_response_timeout: RESPONSE, ..rules() }
}

pub(super) fn travel(h: &mut Harness, to: &str) -> TransitionId {
    h.input(Input::Travel { node: node(to) });
    h.transition()
}

/// `c` answers the transition in flight's `ShowTransition`.
pub(super) fn answer(h: &mut Harness, c: ConnectionId) {
    let transition_id = h.transition();
    h.send(c, ClientMessage::TransitionShown { transition_id });
}

/// Booted, `a` and `b` placed on harbor, then a travel to forest streamed: WaitingForClients,
/// both shown the transition when it resolved.
fn two_placed_then_travel() -> (Harness, TransitionId, ConnectionId, ConnectionId) {
    two_placed_then_travel_with(|_| {})
}

/// The same, with `joining` logging players in while the server loads the forest (so the
/// transition waits for them: they are not arrivals, docs/protocol.md 4.2).
fn two_placed_then_travel_with(
    joining: impl FnOnce(&mut Harness),
) -> (Harness, TransitionId, ConnectionId, ConnectionId) {
    let mut h = Harness::with(WORLD, responsive_rules());
    h.stream_node("harbor");
    let (a, b) = (h.placed("a"), h.placed("b"));
    let t = travel(&mut h, "forest");
    joining(&mut h);
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

/// The other order: a late joiner (logged in while the server loads, so a participant) that
/// answers its own `ShowTransition` in time is waited for.
#[test]
fn a_late_joiner_that_answers_in_time_is_waited_for() {
    let mut late = None;
    let (mut h, t, a, b) = two_placed_then_travel_with(|h| late = Some(h.login("late")));
    let late = late.expect("late logged in");
    answer(&mut h, a);
    answer(&mut h, b);
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
    let mut late = None;
    let (mut h, t, a, b) = two_placed_then_travel_with(|h| late = Some(h.login("late")));
    let late = late.expect("late logged in");
    answer(&mut h, a);
    answer(&mut h, b);
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
    let mut c = None;
    let (mut h, t, a, b) = two_placed_then_travel_with(|h| c = Some(h.login("c")));
    let c = c.expect("c logged in");
    let b_pawn = h.possessed(b).expect("b's pawn on harbor");
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

/// `TravelAbandoned` (docs/spec/travel.md V15) naming a transition that is no travel (this core
/// sends no `TravelTo` yet), in flight or stale, is ignored, and is no answer to
/// `ShowTransition` (T9: nothing else counts); one naming a transition never started is refused
/// with `UnknownTransition`.
#[test]
fn a_travel_abandoned_for_another_move_is_ignored_and_an_unknown_one_refused() {
    let (mut h, old, a, b) = two_placed_then_travel();
    let current = travel(&mut h, "harbor");
    h.stream_node("harbor");
    let stale = h.game.counters().stale_ignored;
    h.send(a, ClientMessage::TravelAbandoned { transition_id: old });
    h.send(a, ClientMessage::TravelAbandoned { transition_id: current });
    assert_eq!(h.game.counters().stale_ignored, stale + 2);
    let refusals = |h: &Harness| {
        h.received(a)
            .iter()
            .filter(|m| {
                matches!(m, ServerMessage::Error { code: ErrorCode::UnknownTransition, .. })
            })
            .count()
    };
    assert_eq!(refusals(&h), 0, "an issued id is never refused");
    h.send(a, ClientMessage::TravelAbandoned { transition_id: TransitionId(999) });
    assert_eq!(refusals(&h), 1);
    answer(&mut h, b);
    h.advance(RESPONSE);
    assert_eq!(h.game.counters().clients_set_aside, 1, "a did not answer; b did");
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

// --- Orderings around a client set aside (found in review) -----------------------------------

/// The core's invariants: at most one live pawn per player; outside a transition every pawn
/// stands on the streamed node.
fn invariants(h: &Harness, at: &str) {
    let mut live: std::collections::BTreeMap<String, usize> = Default::default();
    for p in h.game.roster.pawns().filter(|p| p.alive) {
        *live.entry(p.owner.as_str().to_owned()).or_default() += 1;
    }
    for (who, n) in &live {
        assert!(*n <= 1, "{at}: {who} has {n} live pawns");
    }
    if h.game.transition_id().is_none() {
        let streamed = h.game.streaming.streamed_node().cloned();
        for p in h.game.roster.pawns() {
            assert_eq!(
                Some(&p.node),
                streamed.as_ref(),
                "{at}: pawn {:?} of {} (alive {}) off the streamed node after the transition",
                p.id,
                p.owner,
                p.alive
            );
        }
    }
}

/// Index in `received(c)` of the first message matching `f`.
fn index_of(h: &Harness, c: ConnectionId, f: impl Fn(&ServerMessage) -> bool) -> Option<usize> {
    h.received(c).iter().position(f)
}

/// A client set aside in T1 that answers again and is taken through T2 (an operator travel
/// superseding T1) is waited for in T2: T1's excuse from placement ended with T1, so T2's
/// settle-hold waits for its acknowledgement (found in review: it used to leak).
#[test]
fn a_set_aside_excuse_ends_when_its_transition_is_superseded() {
    let (mut h, t1, a, b) = two_placed_then_travel();
    answer(&mut h, a);
    answer(&mut h, b);
    let late = h.login("late");
    h.advance(RESPONSE);
    assert_eq!(h.game.counters().clients_set_aside, 1);
    assert!(h.player("late").placement_excused);
    // late answers, late: it is responsive again.
    h.send(late, ClientMessage::TransitionShown { transition_id: t1 });
    // An operator travel supersedes T1.
    let t2 = travel(&mut h, "harbor");
    h.stream_node("harbor");
    for x in [a, b, late] {
        answer(&mut h, x);
    }
    h.ready(a);
    h.ready(b);
    h.ready(late);
    let possessed = h.possessed(late);
    assert!(possessed.is_some(), "late got a pawn in T2");
    let p = index_of(&h, late, |m| matches!(m, ServerMessage::Possessed { .. })).unwrap();
    let end = index_of(
        &h,
        late,
        |m| matches!(m, ServerMessage::EndTransition { transition_id } if *transition_id == t2),
    );
    assert!(
        !h.ended(t2),
        "T2 ended before late acknowledged its pawn (Possessed at {p}, EndTransition at {end:?}); \
         placement_excused = {}",
        h.player("late").placement_excused
    );
}

/// The same through a failed transition (the hard maximum): the excuse ends with the failed
/// transition, and the recovery waits for the client's acknowledgement.
#[test]
fn a_set_aside_excuse_ends_when_its_transition_fails() {
    let mut r = responsive_rules();
    r.transition_max = Duration::from_secs(20);
    let mut h = Harness::with(WORLD, r);
    h.stream_node("harbor");
    let a = h.placed("a");
    let t1 = travel(&mut h, "forest");
    h.stream_node("forest");
    answer(&mut h, a);
    let late = h.login("late");
    h.advance(RESPONSE);
    assert!(h.player("late").placement_excused);
    h.send(late, ClientMessage::TransitionShown { transition_id: t1 });
    // a never reports ready within 20 s... but its ready timeout is 30 s: T1 fails at 20 s.
    h.advance(Duration::from_secs(20) - RESPONSE);
    assert_eq!(h.game.counters().transitions_failed, 1);
    let t2 = h.transition();
    assert_ne!(t1, t2);
    // The recovery (back to harbor): late answers and reports ready like everyone.
    let load = h.finish_stream("node harbor");
    h.input(Input::SpawnPointsRegistered { load });
    for x in [a, late] {
        answer(&mut h, x);
        h.ready(x);
    }
    assert!(h.possessed(late).is_some(), "late got a pawn in the recovery");
    assert!(
        !h.ended(t2),
        "the recovery ended before late acknowledged its pawn (excused {})",
        h.player("late").placement_excused
    );
}

/// A dead client set aside that asks to restart: no spawn request is queued for it (it has not
/// streamed the destination; its join places it afterwards), so the settle-hold does not wait
/// for one until the settle timeout.
#[test]
fn a_restart_request_from_a_client_set_aside_does_not_hold_the_transition() {
    let mut h = Harness::with(WORLD, responsive_rules());
    h.stream_node("harbor");
    let (a, b) = (h.placed("a"), h.placed("b"));
    h.kill("b");
    let t = travel(&mut h, "forest");
    h.stream_node("forest");
    answer(&mut h, a);
    h.advance(RESPONSE);
    assert_eq!(h.game.counters().clients_set_aside, 1);
    h.send(b, ClientMessage::RestartRequest);
    h.ready(a);
    let completing = h.now;
    let mut held = Duration::ZERO;
    while !h.ended(t) && held < Duration::from_secs(30) {
        h.advance(Duration::from_millis(100));
        held = h.now - completing;
    }
    assert!(held <= Duration::from_secs(1), "held {held:?}");
    let pending = h.game.snapshot().pending_spawns;
    assert!(
        h.ended(t),
        "a set-aside client holds the transition (phase {}, pending spawns {:?})",
        h.game.snapshot().phase,
        pending
    );
    invariants(&h, "after");
}

/// `proceed` policy: a pawnless client set aside whose client-ready timeout (counted from its
/// set-aside) passes while the transition is still in flight is not treated as having streamed
/// the destination: it gets a join at the end, which places it once it reports.
#[test]
fn under_the_proceed_policy_a_client_set_aside_is_left_to_its_join() {
    let mut r = responsive_rules();
    r.client_ready_policy = ClientReadyPolicy::Proceed;
    r.client_ready_timeout = Duration::from_secs(5);
    let mut h = Harness::with(WORLD, r);
    h.stream_node("harbor");
    let a = h.placed("a");
    let t = travel(&mut h, "forest");
    // The node streams; its spawn points come later, so the settle-hold lasts.
    h.finish_stream("node forest");
    answer(&mut h, a);
    h.ready(a);
    assert_eq!(h.game.snapshot().phase, "Completing");
    let late = h.login("late");
    h.advance(RESPONSE);
    assert_eq!(h.game.counters().clients_set_aside, 1);
    h.advance(Duration::from_secs(5));
    let points = h.game.streaming.streamed_load().expect("streamed");
    h.input(Input::SpawnPointsRegistered { load: points });
    assert!(h.ended(t));
    invariants(&h, "after");
    let placed_somehow = h.possessed(late).is_some()
        || h.game.joins.contains(&pid("late"))
        || h.game.snapshot().pending_spawns.iter().any(|s| s.player == pid("late"));
    assert!(
        placed_somehow,
        "late has no pawn, no join and no spawn request after the transition; loaded = {:?}",
        h.player("late").loaded
    );
    assert!(h.game.joins.contains(&pid("late")), "its join follows the transition");
    h.join_ready(late);
    h.ack(late);
    assert!(h.player("late").is_placed());
    assert_eq!(h.closed(late), None);
}

/// A supersede while a silent client is set aside: the next transition sets it aside from its
/// start, its pawn on the old level is withdrawn at the end, a join follows, and it is kicked
/// a client-ready timeout after it was first set aside.
#[test]
fn a_client_set_aside_through_a_supersede_is_set_aside_again_and_kicked_on_time() {
    let mut r = responsive_rules();
    r.client_ready_timeout = Duration::from_secs(5);
    let mut h = Harness::with(WORLD, r);
    h.stream_node("harbor");
    let (a, b) = (h.placed("a"), h.placed("b"));
    let _t1 = travel(&mut h, "forest");
    h.stream_node("forest");
    answer(&mut h, a);
    h.advance(RESPONSE);
    let set_aside_at = h.now;
    let t2 = travel(&mut h, "crypt");
    h.stream_node("crypt");
    answer(&mut h, a);
    h.ready(a);
    h.finish_stream("rooms");
    invariants(&h, "crypt");
    assert!(h.ended(t2), "b (set aside from the start) holds nobody");
    assert_eq!(h.pawns_of("b"), 0);
    assert!(h.shown_join(b).is_some());
    h.advance(set_aside_at + Duration::from_secs(5) - h.now);
    assert_eq!(h.closed(b), Some(CloseCode::ReadyTimeout));
    invariants(&h, "end");
}

/// A set-aside client relaunches during the transition: the relaunch is shown the
/// transition, answers, and is placed once; one pawn.
#[test]
fn a_client_set_aside_that_relaunches_is_placed_once() {
    let (mut h, t, a, b) = two_placed_then_travel();
    answer(&mut h, a);
    h.advance(RESPONSE);
    let b2 = h.login("b");
    assert_eq!(h.closed(b), Some(CloseCode::Replaced));
    answer(&mut h, b2);
    h.ready(b2);
    h.ready(a);
    h.ack(b2);
    assert!(h.ended(t));
    assert_eq!(h.pawns_of("b"), 1);
    assert!(h.player("b").is_placed());
    invariants(&h, "end");
    h.advance(Duration::from_secs(60));
    assert_eq!(h.closed(b2), None, "the relaunch is not kicked for the old connection's silence");
}

/// A dead client set aside stays silent through the end: its dead pawn on the old level is
/// withdrawn, its join places it (dead), a restart respawns it; never two live pawns.
#[test]
fn a_dead_client_set_aside_stays_dead_through_its_join_until_it_restarts() {
    let mut h = Harness::with(WORLD, responsive_rules());
    h.stream_node("harbor");
    let (a, b) = (h.placed("a"), h.placed("b"));
    h.kill("b");
    let t = travel(&mut h, "forest");
    h.stream_node("forest");
    answer(&mut h, a);
    h.ready(a);
    h.advance(RESPONSE);
    assert!(h.ended(t));
    invariants(&h, "end");
    assert_eq!(h.pawns_of("b"), 0);
    h.join_ready(b);
    h.ack(b);
    assert!(h.player("b").is_dead(), "death survives");
    h.send(b, ClientMessage::RestartRequest);
    h.ack(b);
    invariants(&h, "respawned");
    assert!(h.player("b").is_placed() && !h.player("b").is_dead());
    assert_eq!(h.pawns_of("b"), 1);
}

/// `TransitionShown` during Freezing (before ShowTransition, from the id in FreezeCharacters)
/// counts; the other, silent, is set aside at the response timeout after the resolve.
#[test]
fn a_transition_shown_in_freezing_counts_and_nobody_is_asked_before_the_resolve() {
    let mut h = Harness::with(WORLD, responsive_rules());
    h.stream_node("harbor");
    let (a, b) = (h.placed("a"), h.placed("b"));
    // Hold Freezing with a pending player load.
    h.auto_load = false;
    let _c = h.login("c");
    let t = travel(&mut h, "forest");
    assert_eq!(h.game.snapshot().phase, "Freezing");
    // A login during Freezing is not sent `ShowTransition` yet: it owes nothing either.
    h.auto_load = true;
    h.login("d");
    h.send(a, ClientMessage::TransitionShown { transition_id: t });
    h.advance(RESPONSE * 3);
    assert_eq!(h.game.counters().clients_set_aside, 0, "nothing asked in Freezing");
    h.answer_load("c", crate::model::LoadOutcome::NotFound);
    assert_eq!(h.game.snapshot().phase, "Loading");
    h.advance(RESPONSE);
    // b, c and d did not answer; a did (in Freezing).
    assert_eq!(h.game.counters().clients_set_aside, 3);
    assert!(!h.game.transition.is_set_aside(&pid("a")));
    let _ = b;
}

/// The kick deadline vs. the join: a client set aside that answers its join just before
/// the kick deadline is placed, not kicked.
#[test]
fn a_join_answered_just_before_the_kick_deadline_places_the_client() {
    let mut r = responsive_rules();
    r.client_ready_timeout = Duration::from_secs(5);
    let mut h = Harness::with(WORLD, r);
    h.stream_node("harbor");
    let (a, b) = (h.placed("a"), h.placed("b"));
    let t = travel(&mut h, "forest");
    h.stream_node("forest");
    answer(&mut h, a);
    h.ready(a);
    h.advance(RESPONSE);
    assert!(h.ended(t));
    h.advance(Duration::from_secs(5) - Duration::from_millis(1));
    h.join_ready(b);
    h.ack(b);
    h.advance(Duration::from_secs(60));
    assert_eq!(h.closed(b), None);
    assert!(h.player("b").is_placed());
}

/// Set aside from the start (still unresponsive), then a `TransitionReady` in Freezing: it is
/// back in, and its excuse ends at once (there is no target yet), so the settle-hold waits for
/// its acknowledgement.
#[test]
fn a_client_set_aside_that_reports_ready_in_freezing_is_waited_for_again() {
    let (mut h, t1, a, b) = two_placed_then_travel();
    answer(&mut h, a);
    h.ready(a);
    h.advance(RESPONSE);
    assert!(h.ended(t1));
    // b still silent; its join is pending. A travel with Freezing held by a pending load.
    h.auto_load = false;
    let c = h.login("c");
    let t2 = travel(&mut h, "harbor");
    assert!(h.player("b").placement_excused, "set aside from the start");
    h.send(b, ClientMessage::TransitionReady { transition_id: t2 });
    h.answer_load("c", crate::model::LoadOutcome::NotFound);
    h.stream_node("harbor");
    for x in [a, b, c] {
        answer(&mut h, x);
        h.ready(x);
    }
    h.ack(c);
    let excused = h.player("b").placement_excused;
    let b_possessed = h.possessed(b);
    assert!(
        !h.ended(t2) || h.player("b").is_placed(),
        "T2 ended with b unplaced (excused {excused}, possessed {b_possessed:?})"
    );
}

/// A client that never reports ready nor answers in time, but now and then sends a stale
/// message (ignored, not refused, so never rate-limited), stays unresponsive: only an answer to
/// what it was sent now counts. It is kicked a client-ready timeout after it was set aside,
/// with the default world's shape (a route travel every 15 s, ready timeout 30 s), as a client
/// that never reports ready was before version 5 (found in review: it used to linger forever).
#[test]
fn stale_messages_do_not_make_a_client_set_aside_responsive_again() {
    // The default world's shape: a route travel every 15 s, client-ready timeout 30 s.
    let world = with_route(WORLD, &["forest", "harbor"], 15_000);
    let r = GameRules { client_response_timeout: Duration::from_secs(2), ..rules() };
    let mut h = Harness::with(&world, r);
    h.stream_node("harbor");
    let a = h.placed("a");
    let z = h.login("z");
    let start = h.now;
    let mut held = Vec::new();
    while h.now - start < Duration::from_secs(300) && h.closed(z).is_none() {
        h.advance(Duration::from_millis(100));
        if let Some(t) = h.game.transition_id() {
            // a does its duties at once; z says something stale, late.
            let load =
                h.streams.iter().find(|s| s.what.starts_with("node")).map(|s| s.what.clone());
            if let Some(load) = load {
                h.finish_stream(&load);
                let points = h.game.streaming.streamed_load().expect("streamed");
                h.input(Input::SpawnPointsRegistered { load: points });
                h.send(a, ClientMessage::TransitionShown { transition_id: t });
                h.ready(a);
                let began = h.now;
                while !h.ended(t) && h.now - began < Duration::from_secs(60) {
                    h.advance(Duration::from_millis(100));
                }
                held.push(h.now - began);
                h.advance(Duration::from_secs(1));
                h.send(z, ClientMessage::TransitionShown { transition_id: TransitionId(1) });
            }
        }
    }
    assert_eq!(h.closed(z), Some(CloseCode::ReadyTimeout), "held {held:?}");
    assert!(held.iter().all(|d| *d <= Duration::from_secs(3)), "held {held:?}");
}

/// A client set aside whose kept pawn already stands on the destination (a travel to the node
/// it is on) is not left on an unstreamed level: nothing is withdrawn and no join follows; the
/// next transition asks it again once it answers.
#[test]
fn a_client_set_aside_on_the_destination_keeps_its_pawn_and_gets_no_join() {
    let mut h = Harness::with(WORLD, responsive_rules());
    h.stream_node("harbor");
    let (a, b) = (h.placed("a"), h.placed("b"));
    let b_pawn = h.possessed(b);
    let t = travel(&mut h, "harbor");
    h.stream_node("harbor");
    answer(&mut h, a);
    h.ready(a);
    h.advance(RESPONSE);
    assert!(h.ended(t));
    assert_eq!(h.game.counters().clients_set_aside, 1);
    assert_eq!(h.possessed(b), b_pawn, "its pawn stands on harbor, streamed");
    assert_eq!(h.game.counters().pawns_withdrawn, 0);
    let joins =
        h.received(b).iter().filter(|m| matches!(m, ServerMessage::ShowJoin { .. })).count();
    assert_eq!(joins, 1, "only the join it logged in with");
}

/// An answer belongs to the transition it answered: a client that answered one transition and
/// is silent in the next is set aside in the next at the response timeout, like any other.
#[test]
fn an_answer_to_one_transition_does_not_answer_the_next() {
    let (mut h, first, a, b) = two_placed_then_travel();
    for c in [a, b] {
        answer(&mut h, c);
        h.ready(c);
    }
    assert!(h.ended(first));
    let second = travel(&mut h, "harbor");
    h.stream_node("harbor");
    answer(&mut h, a);
    h.ready(a);
    h.advance(RESPONSE);
    assert!(h.ended(second), "b, silent in this transition, was set aside at its response timeout");
    assert_eq!(h.game.counters().clients_set_aside, 1);
}
