//! The crowd rule (docs/spec/transitions.md T9, `[game] client_response_crowd_floor_ms`): once nine
//! in ten of the clients shown a transition have answered it, the rest may take twice as long as
//! the slowest of those answers took, at least the floor and at most the response timeout. A silent
//! client is set aside about when its peers' slowest would have answered.

use std::time::Duration;

use gatehouse_protocol::TransitionId;

use super::responses::{answer, travel};
use super::*;

/// The response timeout of these tests, the most the crowd rule can leave a client.
const RESPONSE: Duration = Duration::from_millis(500);
/// The crowd rule's floor in these tests.
const FLOOR: Duration = Duration::from_millis(20);
const MS: Duration = Duration::from_millis(1);

fn crowd_rules(floor: Option<Duration>) -> GameRules {
    GameRules { client_response_timeout: RESPONSE, client_response_crowd_floor: floor, ..rules() }
}

/// `n` players placed on harbor, then a travel to forest streamed: every one shown the
/// transition at the same instant, none answered yet.
fn crowd_then_travel(
    n: usize,
    floor: Option<Duration>,
) -> (Harness, TransitionId, Vec<ConnectionId>) {
    let (mut h, t, crowd) = crowd_travelling(n, floor);
    h.stream_node("forest");
    assert_eq!(h.game.snapshot().phase, "WaitingForClients");
    (h, t, crowd)
}

/// The same before the server has streamed the forest (the transition in Loading).
fn crowd_travelling(
    n: usize,
    floor: Option<Duration>,
) -> (Harness, TransitionId, Vec<ConnectionId>) {
    let mut h = Harness::with(WORLD, crowd_rules(floor));
    h.stream_node("harbor");
    let crowd: Vec<ConnectionId> = (0..n).map(|i| h.placed(&format!("p{i:02}"))).collect();
    let t = travel(&mut h, "forest");
    (h, t, crowd)
}

/// The crowd rule does not apply: `answered` answer `at` after `ShowTransition`, and the rest
/// then hold transition `t` until the response timeout, not a millisecond less.
fn held_until_the_response_timeout(
    h: &mut Harness,
    t: TransitionId,
    answered: &[ConnectionId],
    at: Duration,
) {
    h.advance(at);
    answer_and_ready(h, answered);
    h.advance(RESPONSE - at - MS);
    assert!(!h.ended(t), "no crowd rule: the response timeout holds");
    h.advance(MS);
    assert!(h.ended(t), "released at the response timeout");
}

/// Each of `clients` answers `ShowTransition` and reports ready.
fn answer_and_ready(h: &mut Harness, clients: &[ConnectionId]) {
    for &c in clients {
        answer(h, c);
        h.ready(c);
    }
}

/// Nine of ten answer 40 ms after `ShowTransition`: the tenth, silent, is set aside at 80 ms,
/// twice the crowd's answer time, not at the 500 ms response timeout.
#[test]
fn under_the_crowd_rule_a_silent_client_is_set_aside_at_twice_the_crowds_answer_time() {
    let (mut h, t, crowd) = crowd_then_travel(10, Some(FLOOR));
    h.advance(40 * MS);
    answer_and_ready(&mut h, &crowd[..9]);
    h.advance(40 * MS - MS);
    assert!(!h.ended(t), "the silent client is waited for until twice the crowd's time");
    assert_eq!(h.game.counters().clients_set_aside, 0);
    h.advance(MS);
    assert!(h.ended(t), "set aside at twice the crowd's answer time, so the others go on");
    assert_eq!(h.game.counters().clients_set_aside, 1);
    assert_eq!(h.closed(crowd[9]), None, "set aside, not kicked");
}

/// A ready report answers `ShowTransition` too: the crowd answering with ready reports alone
/// (no `TransitionShown`) reaches the quorum and sets the crowd's time.
#[test]
fn ready_reports_alone_reach_the_crowd_rules_quorum() {
    let (mut h, t, crowd) = crowd_then_travel(10, Some(FLOOR));
    h.advance(40 * MS);
    for &c in &crowd[..9] {
        h.ready(c);
    }
    h.advance(40 * MS - MS);
    assert!(!h.ended(t));
    h.advance(MS);
    assert!(h.ended(t), "set aside at twice the time of the ninth ready report");
}

/// A client that answers within twice the crowd's time, after the quorum was reached, is
/// waited for and placed with the others: the rule sets aside only what is far behind.
#[test]
fn a_client_answering_within_twice_the_crowds_time_is_waited_for() {
    let (mut h, t, crowd) = crowd_then_travel(10, Some(FLOOR));
    h.advance(40 * MS);
    answer_and_ready(&mut h, &crowd[..9]);
    h.advance(40 * MS - MS);
    answer_and_ready(&mut h, &crowd[9..]);
    assert!(h.ended(t), "everyone ready: ended at once");
    assert_eq!(h.game.counters().clients_set_aside, 0);
    assert!(h.player("p09").is_placed(), "the slowest is placed with the others");
}

/// The quorum counts who answered against who is still awaited: with two of ten silent (eight
/// in ten answered) it is not reached, and the silent ones hold the others until the response
/// timeout, as without the rule.
#[test]
fn without_nine_in_ten_answered_the_response_timeout_applies() {
    let (mut h, t, crowd) = crowd_then_travel(10, Some(FLOOR));
    held_until_the_response_timeout(&mut h, t, &crowd[..8], 40 * MS);
    assert_eq!(h.game.counters().clients_set_aside, 2);
}

/// A crowd that answers at once (1 ms) does not leave a client 2 ms: the floor holds.
#[test]
fn the_crowd_rule_never_cuts_below_its_floor() {
    let (mut h, t, crowd) = crowd_then_travel(10, Some(FLOOR));
    h.advance(MS);
    answer_and_ready(&mut h, &crowd[..9]);
    h.advance(FLOOR - 2 * MS);
    assert!(!h.ended(t), "the floor holds against twice a 1 ms crowd");
    h.advance(MS);
    assert!(h.ended(t), "set aside at the floor");
}

/// A slow crowd (400 ms) does not stretch the wait past the response timeout (not 800 ms).
#[test]
fn the_crowd_rule_never_waits_beyond_the_response_timeout() {
    let (mut h, t, crowd) = crowd_then_travel(10, Some(FLOOR));
    h.advance(400 * MS);
    answer_and_ready(&mut h, &crowd[..9]);
    h.advance(RESPONSE - 400 * MS - MS);
    assert!(!h.ended(t));
    h.advance(MS);
    assert!(h.ended(t), "set aside at the response timeout, the most the rule leaves");
}

/// Without a floor the rule is off (the default): nine in ten answering changes nothing.
#[test]
fn without_a_crowd_floor_the_crowd_rule_is_off() {
    let (mut h, t, crowd) = crowd_then_travel(10, None);
    held_until_the_response_timeout(&mut h, t, &crowd[..9], 40 * MS);
}

/// The crowd's answer time is fixed by the answer that reached the quorum; later answers do
/// not move it. Ten of twelve answer at 30 ms (the quorum is eleven), the eleventh at 50 ms:
/// the last is set aside at 100 ms (twice 50), not at 60 or later.
#[test]
fn the_answer_that_reaches_the_quorum_sets_the_crowds_time() {
    let (mut h, t, crowd) = crowd_then_travel(12, Some(FLOOR));
    h.advance(30 * MS);
    answer_and_ready(&mut h, &crowd[..10]);
    h.advance(20 * MS);
    answer_and_ready(&mut h, &crowd[10..11]);
    h.advance(50 * MS - MS);
    assert!(!h.ended(t), "twice the eleventh answer's 50 ms, not the tenth's 30 ms");
    h.advance(MS);
    assert!(h.ended(t));
}

/// Ten answer at 40 ms (the tenth's ready report comes at 60 ms); `late` logs in at 50 ms,
/// while the server still loads the forest (so the transition waits for it), and reports
/// ready, so it is spawned at 60 ms when everyone is ready: returns the harness, the
/// transition and `late`'s connection, its possession not yet acknowledged.
fn crowd_with_a_late_possession() -> (Harness, TransitionId, ConnectionId) {
    let (mut h, t, crowd) = crowd_travelling(10, Some(FLOOR));
    h.advance(40 * MS);
    answer_and_ready(&mut h, &crowd[..9]);
    answer(&mut h, crowd[9]);
    h.advance(10 * MS);
    let late = h.login("late");
    answer(&mut h, late);
    h.ready(late);
    h.stream_node("forest");
    h.advance(10 * MS);
    h.ready(crowd[9]);
    assert!(h.possessed(late).is_some(), "spawned once everyone is ready");
    assert!(!h.ended(t), "the settle-hold waits for its acknowledgement");
    (h, t, late)
}

/// An acknowledgement is an answer that needs no streaming too: while the transition has a
/// crowd answer time (40 ms), a possession not acknowledged within twice it (from 60 ms to
/// 140 ms) no longer holds the settle-hold, rather than the 500 ms response timeout.
#[test]
fn under_the_crowd_rule_an_unacknowledged_possession_is_excused_at_twice_the_crowds_time() {
    let (mut h, t, _late) = crowd_with_a_late_possession();
    h.advance(80 * MS - MS);
    assert!(!h.ended(t), "the acknowledgement is awaited for twice the crowd's time");
    h.advance(MS);
    assert!(h.ended(t), "excused at twice the crowd's time, so the transition ends");
    assert_eq!(h.game.counters().acknowledgements_late, 1);
    assert!(h.player("late").placement_excused);
}

/// The other order: the acknowledgement within twice the crowd's time ends the transition at
/// once, nothing excused.
#[test]
fn under_the_crowd_rule_a_possession_acknowledged_in_time_ends_the_transition() {
    let (mut h, t, late) = crowd_with_a_late_possession();
    h.advance(80 * MS - MS);
    h.ack(late);
    assert!(h.ended(t));
    assert_eq!(h.game.counters().acknowledgements_late, 0);
    assert!(!h.player("late").placement_excused);
}

/// Answers after the quorum do not move the crowd's answer time: eighteen of twenty answer at
/// 30 ms (the quorum), the nineteenth at 55 ms; the silent twentieth is set aside at 60 ms,
/// twice the quorum's 30 ms, not twice 55 ms.
#[test]
fn answers_after_the_quorum_do_not_move_the_crowds_time() {
    let (mut h, t, crowd) = crowd_then_travel(20, Some(FLOOR));
    h.advance(30 * MS);
    answer_and_ready(&mut h, &crowd[..18]);
    h.advance(25 * MS);
    answer_and_ready(&mut h, &crowd[18..19]);
    h.advance(5 * MS - MS);
    assert!(!h.ended(t));
    h.advance(MS);
    assert!(h.ended(t), "set aside at twice the quorum's answer time");
}

/// A crowd of two is no crowd: one of two answering is half, not nine in ten, so the silent
/// other holds the transition until the response timeout.
#[test]
fn one_of_two_answering_does_not_reach_the_quorum() {
    let (mut h, t, crowd) = crowd_then_travel(2, Some(FLOOR));
    held_until_the_response_timeout(&mut h, t, &crowd[..1], 40 * MS);
}

/// Joiners are asked at their own login, not with the crowd, and each answer is timed from its
/// own `ShowTransition`: nine answer at 40 ms (the crowd's time); two join at 50 ms, one
/// answers at once, the other 25 ms after its `ShowTransition`, faster than anyone in the crowd:
/// it is not far behind its peers and is not set aside.
#[test]
fn a_joiner_answering_faster_than_the_crowd_is_not_set_aside() {
    let (mut h, t, crowd) = crowd_then_travel(9, Some(FLOOR));
    h.advance(40 * MS);
    for &c in &crowd {
        answer(&mut h, c);
    }
    h.advance(10 * MS);
    let quick = h.login("late-a");
    let slower = h.login("late-b");
    h.advance(MS);
    answer(&mut h, quick);
    h.advance(24 * MS);
    answer(&mut h, slower);
    assert!(!h.ended(t));
    assert_eq!(
        h.game.counters().clients_set_aside,
        0,
        "a joiner answering in 25 ms, against a crowd that took 40 ms, was set aside"
    );
}

/// `TransitionShown` may come before `ShowTransition` (it may follow `FreezeCharacters`, which
/// carries the id: docs/protocol.md §4). Such an answer measures nothing, so it must not count
/// towards the quorum: here eighteen of twenty-one answer early, then of the three asked at the
/// resolve one answers at 1 ms, which "reaches nine in ten" with a single measured answer, and
/// cuts the other two to the floor. The quorum should count measured answers only: one of three
/// is no crowd, and the response timeout holds.
#[test]
fn answers_before_show_transition_do_not_make_a_quorum_of_one_measured_answer() {
    let mut h = Harness::with(WORLD, crowd_rules(Some(FLOOR)));
    h.stream_node("harbor");
    let crowd: Vec<ConnectionId> = (0..20).map(|i| h.placed(&format!("p{i:02}"))).collect();
    // A login whose load is still in flight holds the travel in Freezing (persistence first).
    h.auto_load = false;
    let loading = h.login("loading");
    let t = travel(&mut h, "forest");
    assert_eq!(h.game.snapshot().phase, "Freezing");
    for &c in &crowd[..18] {
        h.send(c, ClientMessage::TransitionShown { transition_id: t });
    }
    h.answer_load("loading", crate::model::LoadOutcome::NotFound);
    h.stream_node("forest");
    assert_eq!(h.game.snapshot().phase, "WaitingForClients");
    h.advance(MS);
    answer(&mut h, crowd[18]);
    h.advance(MS);
    answer(&mut h, loading);
    h.advance(23 * MS);
    answer(&mut h, crowd[19]);
    assert_eq!(
        h.game.counters().clients_set_aside,
        0,
        "set aside at the floor, cut by a crowd of one measured answer"
    );
}

/// The crowd's answer time is the slowest measured answer, not the one that happened to reach
/// the quorum: seventeen of nineteen answer at 40 ms (just under nine in ten); a joiner logs in
/// at 50 ms and answers at once, which reaches the quorum. The crowd's time is 40 ms, not the
/// joiner's 1 ms, so the last two, answering at 70 ms, are within twice it and not set aside.
#[test]
fn the_crowds_time_is_the_slowest_measured_answer_not_the_last() {
    let (mut h, t, crowd) = crowd_then_travel(19, Some(FLOOR));
    h.advance(40 * MS);
    answer_and_ready(&mut h, &crowd[..17]);
    h.advance(10 * MS);
    let quick = h.login("quick");
    h.advance(MS);
    answer_and_ready(&mut h, &[quick]);
    h.advance(19 * MS);
    answer_and_ready(&mut h, &crowd[17..]);
    assert_eq!(h.game.counters().clients_set_aside, 0, "within twice the crowd's 40 ms");
    h.ack(quick);
    assert!(h.ended(t), "everyone ready and placed");
}
