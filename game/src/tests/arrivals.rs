//! Arrivals (docs/spec/sessions.md S7, docs/protocol.md 4.2): a player who first logs in once a
//! transition waits for its clients (WaitingForClients or Completing) follows it, but the
//! transition does not wait for it, so a steady stream of logins cannot hold a transition open. Its
//! ready report, if it comes before the end, places it in the spawn window; otherwise a join of its
//! own places it right after `EndTransition`. Players present at the start, those who logged in
//! while the server loaded, and their relaunches are still waited for. Both orders are tested.

use gatehouse_protocol::{ServerMessage, TransitionId};

use super::*;

/// [`completing_with`] the default rules, without `a`.
fn completing() -> (Harness, TransitionId, ConnectionId) {
    let (h, t, _a, b) = completing_with(rules());
    (h, t, b)
}

/// `late`'s join of its own (shown after the end) places it, with one pawn.
fn placed_by_its_join(h: &mut Harness, late: ConnectionId) {
    h.join_ready(late);
    h.ack(late);
    assert!(h.player("late").is_placed(), "the join placed it");
    assert_eq!(h.pawns_of("late"), 1);
}

fn shown(h: &Harness, connection: ConnectionId, id: TransitionId) -> bool {
    h.received(connection).iter().any(
        |m| matches!(m, ServerMessage::ShowTransition { transition_id, .. } if *transition_id == id),
    )
}

/// Ends before the arrival reports: the transition ends once `b` is placed, and the arrival
/// gets a join of its own that places it.
#[test]
fn an_arrival_in_the_spawn_window_is_not_waited_for() {
    let (mut h, t, b) = completing();
    let late = h.login("late");
    assert!(shown(&h, late, t), "the arrival follows the transition: it is shown it");
    assert!(h.shown_join(late).is_none());
    h.ack(b);
    assert!(h.ended(t), "the transition ended without the arrival's ready report");
    assert!(h.shown_join(late).is_some(), "a join of its own after EndTransition");
    placed_by_its_join(&mut h, late);
}

/// Reports before the end: the arrival is spawned in the window, and the transition still
/// ends on `b`'s acknowledgement without waiting for the arrival's.
#[test]
fn an_arrival_that_reports_in_the_spawn_window_is_placed_in_it() {
    let (mut h, t, b) = completing();
    let late = h.login("late");
    h.ready(late);
    assert!(h.possessed(late).is_some(), "spawned in the window on its own ready report");
    h.ack(b);
    assert!(h.ended(t), "the transition did not wait for the arrival's acknowledgement");
    assert!(h.shown_join(late).is_none(), "it has its pawn: no join");
    h.ack(late);
    assert!(h.player("late").is_placed());
}

/// A stream of arrivals, each reporting ready but none acknowledging yet, cannot hold the
/// transition open: it ends on the acknowledgement of the last player present when the
/// window opened.
#[test]
fn a_stream_of_arrivals_cannot_hold_the_spawn_window_open() {
    let (mut h, t, b) = completing();
    let arrivals: Vec<ConnectionId> = (0..5).map(|i| h.login(&format!("n{i}"))).collect();
    for &c in &arrivals {
        h.ready(c);
    }
    h.ack(b);
    assert!(h.ended(t), "five arrivals in flight did not hold the transition open");
    for (i, &c) in arrivals.iter().enumerate() {
        h.ack(c);
        assert!(h.player(&format!("n{i}")).is_placed(), "arrival {i} placed by its own pawn");
    }
}

/// The end lifts the arrival's excuse: the next transition waits for it like anyone.
#[test]
fn an_arrival_is_waited_for_by_the_next_transition() {
    let (mut h, t, b) = completing();
    let late = h.login("late");
    h.ack(b);
    assert!(h.ended(t));
    h.join_ready(late);
    h.ack(late);
    h.input(Input::Travel { node: node("harbor") });
    let next = h.transition();
    h.stream_node("harbor");
    let a = h.game.roster.connection_of(&pid("a")).expect("a is logged in");
    h.ready(a);
    h.ready(b);
    assert!(!h.ended(next), "the next transition waits for the former arrival's report");
    h.ready(late);
    assert!(h.ended(next));
}

/// A booted harness travelling to the forest with `a` placed, the forest streamed on the
/// server: the transition waits for `a`'s ready report. Returns the harness, the transition
/// and `a`.
fn waiting_for_clients() -> (Harness, TransitionId, ConnectionId) {
    let mut h = Harness::booted();
    let a = h.placed("a");
    h.input(Input::Travel { node: node("forest") });
    let t = h.transition();
    h.stream_node("forest");
    assert_eq!(h.game.snapshot().phase, "WaitingForClients");
    (h, t, a)
}

/// An arrival while the transition waits for its clients does not hold the ready barrier:
/// the last participant's report ends the transition, and the arrival's join follows.
#[test]
fn an_arrival_while_clients_are_awaited_does_not_hold_the_barrier() {
    let (mut h, t, a) = waiting_for_clients();
    let late = h.login("late");
    assert!(shown(&h, late, t));
    h.ready(a);
    assert!(h.ended(t), "a's report was the last one awaited");
    assert!(h.shown_join(late).is_some(), "a join of its own after EndTransition");
}

/// The other order: the arrival reports before the last participant, and is spawned in the
/// window once it opens; the transition does not wait for its acknowledgement.
#[test]
fn an_arrival_that_reports_before_the_barrier_is_spawned_in_the_window() {
    let (mut h, t, a) = waiting_for_clients();
    let late = h.login("late");
    h.ready(late);
    assert_eq!(h.game.snapshot().phase, "WaitingForClients", "a's report is still awaited");
    assert!(h.possessed(late).is_none(), "no spawn before the window");
    h.ready(a);
    assert!(h.possessed(late).is_some(), "spawned in the window on its own earlier report");
    assert!(h.ended(t), "its acknowledgement is not awaited");
    h.ack(late);
    assert!(h.player("late").is_placed() && h.shown_join(late).is_none());
}

/// A booted harness on `rules` travelling to the forest, in Completing: `a` (a kept pawn,
/// placed at once) and `b` (logged in while the server loaded the forest, so waited for;
/// possessed and not acknowledged yet) both reported ready. Returns the harness, the
/// transition, `a` and `b`.
pub(super) fn completing_with(
    rules: GameRules,
) -> (Harness, TransitionId, ConnectionId, ConnectionId) {
    let mut h = Harness::with(WORLD, rules);
    let boot = h.transition();
    h.stream_node("harbor");
    assert!(h.ended(boot));
    let a = h.placed("a");
    h.input(Input::Travel { node: node("forest") });
    let t = h.transition();
    let b = h.login("b");
    h.stream_node("forest");
    h.ready(a);
    h.ready(b);
    assert_eq!(h.game.snapshot().phase, "Completing");
    (h, t, a, b)
}

/// An arrival that reports ready before the store answered its save: its spawn request waits
/// for the save, and the transition does not wait for the request; a join of its own places
/// it once the save is in (found by review: the request held the settle-hold until the hard
/// maximum failed the transition for everyone).
#[test]
fn an_arrival_whose_save_is_still_loading_does_not_hold_the_transition() {
    let (mut h, t, _a, b) = completing_with(rules());
    h.auto_load = false;
    let late = h.login("late");
    h.ready(late);
    h.ack(b);
    assert!(h.ended(t), "every participant is placed; the arrival's save load is not awaited");
    assert!(h.shown_join(late).is_some(), "a join of its own follows the end");
    assert_eq!(h.game.snapshot().pending_spawns.len(), 0, "its old request went with the end");
    h.answer_load("late", crate::model::LoadOutcome::NotFound);
    placed_by_its_join(&mut h, late);
}

/// An arrival that never acknowledges its pawn (excused by the response timeout) stays excused
/// after the end, as a participant in its place does: the next transition, which only
/// teleports that pawn, does not wait for the acknowledgement (found by review: the end lifted
/// the excuse and the next transition waited until its settle timeout kicked the arrival).
#[test]
fn an_arrival_that_never_acknowledges_does_not_hold_the_next_transition() {
    let rules = GameRules { client_response_timeout: Duration::from_secs(2), ..rules() };
    let (mut h, t, a, b) = completing_with(rules);
    let late = h.login("late");
    h.ready(late);
    assert!(h.possessed(late).is_some());
    h.advance(Duration::from_secs(3));
    assert!(h.ended(t), "neither b nor the arrival acknowledged: both excused");
    assert!(h.player("late").placement_excused && h.player("b").placement_excused);
    h.input(Input::Travel { node: node("harbor") });
    let next = h.transition();
    h.stream_node("harbor");
    for c in [a, b, late] {
        h.ready(c);
    }
    assert!(h.ended(next), "nothing waits for an acknowledgement no teleport asked for");
}

/// An arrival that leaves and relaunches during the same transition is an arrival again: one
/// pawn, through its join.
#[test]
fn an_arrival_relaunched_in_the_same_transition_is_still_not_waited_for() {
    let (mut h, t, _a, b) = completing_with(rules());
    let late = h.login("late");
    h.ready(late);
    h.disconnect(late);
    let again = h.login("late");
    assert!(h.game.transition.is_arrival(&pid("late")));
    h.ack(b);
    assert!(h.ended(t));
    placed_by_its_join(&mut h, again);
}

/// A travel superseding the transition makes its arrivals participants of the new one: it
/// waits for them.
#[test]
fn a_supersede_makes_arrivals_participants() {
    let (mut h, _t, a, b) = completing_with(rules());
    let late = h.login("late");
    h.input(Input::Travel { node: node("harbor") });
    let next = h.transition();
    assert!(!h.player("late").placement_excused);
    h.stream_node("harbor");
    h.ready(a);
    h.ready(b);
    assert!(!h.ended(next), "the former arrival's report is awaited");
    h.ready(late);
    h.ack(b);
    h.ack(late);
    assert!(h.ended(next));
}
