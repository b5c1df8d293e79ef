//! The phased transition and its settle-hold, and no client can wedge a transition
//! (docs/spec/transitions.md T3, T5, T7, T9): supersede and disconnect in every phase, early
//! and stale ready reports, the client-ready timeout, the settle-hold and its timeout.

use std::time::Duration;

use gatehouse_protocol::{ClientMessage, CloseCode, PawnId, ServerMessage, TransitionId};
use gatehouse_tags::catalog::EFFECT_DAMAGE_OVER_TIME_POISON;

use super::*;
use crate::model::SessionSave;
use crate::{Observation, TransitionOutcome};

fn travel(h: &mut Harness, to: &str) -> TransitionId {
    h.input(Input::Travel { node: node(to) });
    h.transition()
}

/// The test rules under the `proceed` client-ready policy.
fn proceeding() -> GameRules {
    GameRules { client_ready_policy: ClientReadyPolicy::Proceed, ..rules() }
}

/// A harness under the `proceed` policy, booted at harbor.
fn booted_proceeding() -> Harness {
    let mut h = Harness::with(WORLD, proceeding());
    h.stream_node("harbor");
    h
}

fn shown(h: &Harness, c: ConnectionId, id: TransitionId) -> bool {
    h.received(c).iter().any(|m| matches!(m, ServerMessage::ShowTransition { transition_id, .. } if *transition_id == id))
}

/// The boot transition in Completing with two players: `a` placed, `b` possessed a pawn it
/// never acknowledges.
fn boot_with_b_unacknowledged(
    rules: GameRules,
) -> (Harness, TransitionId, ConnectionId, ConnectionId) {
    let mut h = Harness::with(WORLD, rules);
    let t = h.transition();
    let (a, b) = (h.login("a"), h.login("b"));
    h.stream_node("harbor");
    h.ready(a);
    h.ready(b);
    h.ack(a);
    (h, t, a, b)
}

/// T5: a new travel arriving mid-transition supersedes the in-flight one; client tracking
/// resets but the screen stays up. Phase: Freezing (the boot travel waits for the session
/// save).
#[test]
fn a_travel_supersedes_a_transition_in_freezing() {
    let mut h = Harness::holding_loads(WORLD);
    let boot = h.transition();
    let second = travel(&mut h, "forest");
    assert!(second > boot);
    assert!(!h.ended(boot), "the superseded transition never ends: the screen stays up");
    assert_eq!(h.game.counters().transitions_superseded, 1);
    assert_eq!(h.game.counters().transitions_started, 2, "the boot and the travel");
    h.answer_session(LoadOutcome::Found(SessionSave {
        session: "main".into(),
        node: node("crypt"),
        version: 1,
    }));
    assert_eq!(
        h.game.snapshot().transition_target,
        Some(node("forest")),
        "the newer travel's node wins"
    );
}

/// Supersede in Loading: the old load's completion is stale and applies to nothing.
#[test]
fn a_travel_supersedes_a_transition_in_loading_and_its_load_is_ignored() {
    let mut h = Harness::booted();
    let a = h.placed("a");
    let first = travel(&mut h, "forest");
    let second = travel(&mut h, "crypt");
    assert!(shown(&h, a, second));
    h.finish_stream("node forest");
    assert_eq!(
        h.game.snapshot().phase,
        "Loading",
        "the stale forest load does not advance the new transition"
    );
    assert_eq!(h.game.counters().stale_ignored, 1);
    assert!(!h.ended(first));
}

/// Supersede in WaitingForClients: ready reports for the old id do not count for the new one.
#[test]
fn a_travel_supersedes_a_transition_in_waiting_and_old_ready_reports_are_ignored() {
    let mut h = Harness::booted();
    let (a, b) = (h.placed("a"), h.placed("b"));
    let first = travel(&mut h, "forest");
    h.stream_node("forest");
    h.send(a, ClientMessage::TransitionReady { transition_id: first });
    let second = travel(&mut h, "harbor");
    h.stream_node("harbor");
    h.send(b, ClientMessage::TransitionReady { transition_id: first });
    assert_eq!(
        h.game.snapshot().phase,
        "WaitingForClients",
        "reports for {first:?} count for nothing"
    );
    h.ready(b);
    assert_eq!(
        h.game.snapshot().phase,
        "WaitingForClients",
        "ready tracking restarted: a's old report is gone"
    );
    h.ready(a);
    assert_eq!(h.game.snapshot().phase, "None", "placed players end it as soon as all are ready");
    assert!(h.ended(second) && !h.ended(first));
}

/// Supersede in Completing: the new transition teleports the pawns; the old one never ends.
#[test]
fn a_travel_supersedes_a_transition_in_completing() {
    let mut h = Harness::booted();
    let a = h.placed("a");
    let first = travel(&mut h, "crypt");
    h.stream_node("crypt");
    h.ready(a);
    assert_eq!(h.game.snapshot().phase, "Completing", "held: the crypt's rooms are streaming");
    let second = travel(&mut h, "harbor");
    assert_eq!(h.game.counters().stale_ignored, 1, "a's teleport to the crypt, dropped");
    h.stream_node("harbor");
    h.ready(a);
    assert!(h.ended(second) && !h.ended(first));
    assert_eq!(h.pawns_of("a"), 1);
    let pawn = h.possessed(a).unwrap();
    assert_eq!(h.game.roster.pawn(pawn).unwrap().node, node("harbor"));
}

/// Disconnect in Freezing: a player whose save is still loading leaves; the travel resolves.
#[test]
fn a_disconnect_in_freezing_does_not_wedge_the_travel() {
    let mut h = Harness::holding_loads(WORLD);
    h.answer_session(LoadOutcome::NotFound);
    h.stream_node("harbor");
    let c = h.login("a");
    let t = travel(&mut h, "forest");
    assert_eq!(h.game.snapshot().phase, "Freezing", "waits for a's save");
    h.disconnect(c);
    assert_eq!(h.game.snapshot().phase, "Loading");
    h.stream_node("forest");
    assert!(h.ended(t));
}

/// Disconnect in Loading: the transition proceeds with the others.
#[test]
fn a_disconnect_in_loading_does_not_wedge_the_transition() {
    let mut h = Harness::booted();
    let (a, b) = (h.placed("a"), h.placed("b"));
    let t = travel(&mut h, "forest");
    h.disconnect(b);
    h.stream_node("forest");
    h.ready(a);
    assert!(h.ended(t));
}

/// Disconnect in Completing: an unplaced player leaving lets the transition end at once.
#[test]
fn a_disconnect_in_completing_does_not_wedge_the_transition() {
    let (mut h, t, _, b) = boot_with_b_unacknowledged(rules());
    assert!(!h.ended(t), "b has not acknowledged");
    h.disconnect(b);
    assert!(h.ended(t));
}

/// A ready report for the transition in flight is kept even while the server is still
/// loading.
#[test]
fn an_early_ready_report_is_kept_until_waiting_for_clients() {
    let mut h = Harness::booted();
    let a = h.placed("a");
    let t = travel(&mut h, "forest");
    h.ready(a);
    assert_eq!(h.game.snapshot().phase, "Loading");
    h.stream_node("forest");
    h.advance(Duration::from_millis(100));
    assert!(h.ended(t), "the early report counted: no second report was needed");
}

/// A ready report for a superseded transition is ignored, not refused.
#[test]
fn a_stale_ready_report_is_ignored_without_an_error() {
    let mut h = Harness::booted();
    let a = h.placed("a");
    let first = travel(&mut h, "forest");
    travel(&mut h, "harbor");
    h.send(a, ClientMessage::TransitionReady { transition_id: first });
    assert!(!h.received(a).iter().any(|m| matches!(m, ServerMessage::Error { .. })));
    assert!(h.game.counters().stale_ignored >= 1);
}

/// T9, kick policy: a client that never reports ready is closed at the client-ready
/// timeout and the transition proceeds without it.
#[test]
fn a_client_that_never_reports_ready_is_kicked_at_the_timeout() {
    let mut h = Harness::booted();
    let (a, b) = (h.placed("a"), h.placed("b"));
    let t = travel(&mut h, "forest");
    h.stream_node("forest");
    h.ready(a);
    h.advance(Duration::from_secs(29));
    assert_eq!(h.closed(b), None);
    h.advance(Duration::from_secs(1));
    assert_eq!(h.closed(b), Some(CloseCode::ReadyTimeout));
    assert!(h.ended(t));
    assert_eq!(h.game.counters().ready_timeouts, 1);
}

/// T9, proceed policy: the transition goes on without the report; the client stays.
#[test]
fn under_the_proceed_policy_a_silent_client_stays_and_the_transition_goes_on() {
    let mut h = booted_proceeding();
    let (a, b) = (h.placed("a"), h.placed("b"));
    let t = travel(&mut h, "forest");
    h.stream_node("forest");
    h.ready(a);
    h.advance(Duration::from_secs(30));
    assert_eq!(h.closed(b), None);
    assert!(h.ended(t), "b's pawn was teleported; everyone is placed");
}

/// A travel to the node the pawns already stand on queues no teleport: `EnsureSpawnsQueued`
/// asks only for the pawnless and for pawns on another node. The transition ends at the ready
/// report, the pawn where it stood.
#[test]
fn a_travel_to_the_node_the_pawns_stand_on_teleports_nobody() {
    let mut h = Harness::booted();
    let a = h.placed("a");
    let pawn = h.possessed(a).unwrap();
    let t = travel(&mut h, "harbor");
    h.stream_node("harbor");
    h.ready(a);
    assert!(h.ended(t));
    assert!(!h.broadcasts().iter().any(|m| matches!(m, ServerMessage::PawnsTeleported { .. })));
    assert_eq!(h.possessed(a), Some(pawn));
}

/// Ensure-spawns asks nothing for a pawn already on the destination: a travel back to the
/// dungeon the pawn stands in, whose rooms finish before its client reports, has no pending
/// spawn request (the snapshot and the pending-spawns gauge read 0).
#[test]
fn a_pawn_already_on_the_destination_gets_no_spawn_request() {
    let mut h = Harness::booted();
    let a = h.placed("a");
    let first = travel(&mut h, "crypt");
    h.stream_node("crypt");
    h.ready(a);
    h.finish_stream("dungeon rooms");
    assert!(h.ended(first));
    travel(&mut h, "crypt");
    h.stream_node("crypt");
    h.finish_stream("dungeon rooms");
    assert_eq!(h.game.snapshot().pending_spawns.len(), 0);
    assert_eq!(h.game.pending_spawn_count(), 0);
}

/// Proceed policy, for a join: nothing waits for a joiner, so a joiner that never reports its
/// node streamed keeps its own loading screen and gets no pawn; it is neither closed nor spawned
/// as if it had streamed, and a late report still places it.
#[test]
fn under_the_proceed_policy_a_silent_joiner_is_left_waiting_without_a_pawn() {
    let mut h = booted_proceeding();
    let b = h.login("b");
    assert!(h.shown_join(b).is_some());
    h.advance(Duration::from_secs(31));
    assert_eq!(h.closed(b), None);
    assert_eq!(h.pawns_of("b"), 0, "not spawned as if it had streamed");
    assert_eq!(h.game.counters().ready_timeouts, 1);
    h.join_ready(b);
    h.ack(b);
    assert!(h.player("b").is_placed());
}

/// T7, the settle-hold: at the timeout, with nothing loading, the transition ends anyway and a
/// warning names the unplaced players.
#[test]
fn the_settle_timeout_ends_a_wedged_transition_and_names_the_unplaced_players() {
    let (mut h, t, _, _) = boot_with_b_unacknowledged(rules());
    h.advance(Duration::from_millis(14_999));
    assert!(!h.ended(t));
    h.advance(Duration::from_millis(1));
    assert!(h.ended(t));
    let snapshot = h.game.snapshot();
    assert_eq!(snapshot.counters.settle_timeouts, 1);
    assert_eq!(snapshot.last_settle_timeout_unplaced, vec![pid("b")]);
}

/// T7: `IsLoadInFlight` keeps extending the deadline, so a slow stream is not mistaken for a
/// wedge: dungeon rooms streaming for longer than the settle timeout.
#[test]
fn a_load_in_flight_extends_the_settle_deadline() {
    let mut h = Harness::booted();
    let a = h.placed("a");
    let t = travel(&mut h, "crypt");
    h.stream_node("crypt");
    h.ready(a);
    assert_eq!(h.game.snapshot().phase, "Completing");
    h.advance(Duration::from_secs(40));
    assert!(!h.ended(t), "rooms still streaming: the hold is extended, not timed out");
    let loads = h.game.snapshot().loads_in_flight;
    assert_eq!(loads.len(), 1, "{loads:?}");
    assert!(loads[0].contains("dungeon rooms of crypt"), "{loads:?}");
    assert!(h.game.counters().settle_extensions >= 2);
    h.finish_stream("dungeon rooms");
    assert!(h.ended(t), "a's pawn teleports into the crypt once its rooms are in");
    assert_eq!(h.game.counters().settle_timeouts, 0);
}

/// T11: no polling; the transition ends in the step in which its last player is placed.
#[test]
fn the_transition_ends_in_the_step_its_last_player_is_placed() {
    let mut h = Harness::new();
    let t = h.transition();
    let a = h.login("a");
    h.stream_node("harbor");
    h.ready(a);
    assert!(!h.ended(t));
    h.ack(a);
    assert!(h.ended(t), "no time passed between the acknowledgement and the end");
}

/// T12 and T5: characters freeze on every machine and the loading screen holds through a
/// supersede: clients see Freeze for each id and exactly one End, for the newest.
#[test]
fn clients_see_one_end_for_the_newest_transition_after_a_supersede() {
    let mut h = Harness::booted();
    let a = h.placed("a");
    let first = travel(&mut h, "forest");
    let second = travel(&mut h, "harbor");
    h.stream_node("harbor");
    h.ready(a);
    let got = h.received(a);
    let freezes = got.iter().filter(|m| matches!(m, ServerMessage::FreezeCharacters { transition_id } if *transition_id == first || *transition_id == second)).count();
    let ends: Vec<_> = got
        .iter()
        .filter_map(|m| match m {
            ServerMessage::EndTransition { transition_id } => Some(*transition_id),
            _ => None,
        })
        .collect();
    assert_eq!(freezes, 2);
    assert_eq!(ends.last(), Some(&second));
    assert!(!ends.contains(&first));
}

/// In a world that asks for it (`rebalance_teams`, as the soak world does), teams are
/// rebalanced at every travel, so clients exercise the presentation-only team change: teams
/// stay even, some players change sides, and the change is replicated.
#[test]
fn teams_are_rebalanced_at_every_travel() {
    let world = format!("rebalance_teams = true\n{WORLD}");
    let mut h = Harness::with(&world, rules());
    h.stream_node("harbor");
    let clients: Vec<_> = ["a", "b", "c", "d"].iter().map(|n| h.placed(n)).collect();
    let teams = |h: &Harness| -> Vec<u8> { h.game.roster.players().map(|p| p.team.0).collect() };
    let before = teams(&h);
    let from = h.log.len();
    travel(&mut h, "forest");
    let after = teams(&h);
    assert_ne!(before, after, "some players changed sides");
    assert_eq!(after.iter().filter(|t| **t == 1).count(), 2, "teams stay even: {after:?}");
    let updates = h.log[from..]
        .iter()
        .filter(|o| {
            matches!(o, Output::Broadcast { message: ServerMessage::PlayerStateUpdated(_) })
        })
        .count();
    assert!(updates >= 2, "the changes are replicated to every client");
    assert_eq!(clients.len(), 4);
}

/// A player whose save has not loaded is not announced yet (docs/spec/sessions.md S13): a team
/// change at a travel is not replicated for it, and its announcement carries the new team.
#[test]
fn a_team_change_of_a_player_not_yet_announced_goes_out_with_its_announcement() {
    let world = format!("rebalance_teams = true\n{WORLD}");
    let mut h = Harness::holding_loads(&world);
    h.answer_session(LoadOutcome::NotFound);
    h.stream_node("harbor");
    h.placed_answering_load("a");
    // b and d are team 2 and not announced: the travel's swap moves one of them.
    for name in ["b", "c", "d"] {
        h.login(name);
    }
    let teams = |h: &Harness| -> Vec<u8> { h.game.roster.players().map(|p| p.team.0).collect() };
    let before = teams(&h);
    travel(&mut h, "forest");
    assert_ne!(teams(&h), before, "some players changed sides");
    let states = |h: &Harness| -> Vec<gatehouse_protocol::PlayerStateView> {
        h.broadcasts()
            .into_iter()
            .filter_map(|m| match m {
                ServerMessage::PlayerStateUpdated(view) => Some(view),
                _ => None,
            })
            .collect()
    };
    let told: Vec<_> = states(&h).into_iter().map(|v| v.player_id.to_string()).collect();
    assert!(told.iter().all(|p| p == "a"), "only the announced player: {told:?}");
    for name in ["b", "c", "d"] {
        h.answer_load(name, LoadOutcome::NotFound);
    }
    for name in ["b", "c", "d"] {
        let views: Vec<_> =
            states(&h).into_iter().filter(|v| v.player_id.as_str() == name).collect();
        assert_eq!(views.len(), 1, "{name} is announced once");
        assert_eq!(views[0].team, Some(h.player(name).team), "{name}'s team now");
    }
}

/// Team rebalancing is a world setting, off by default: without it a travel changes nobody's
/// team (a team is chosen once, at login) and replicates no player state.
#[test]
fn teams_are_not_rebalanced_when_the_world_does_not_ask_for_it() {
    let mut h = Harness::booted();
    for name in ["a", "b", "c", "d"] {
        h.placed(name);
    }
    let teams = |h: &Harness| -> Vec<u8> { h.game.roster.players().map(|p| p.team.0).collect() };
    let before = teams(&h);
    assert_eq!(before, vec![1, 2, 1, 2], "logins join the smaller team");
    let from = h.log.len();
    travel(&mut h, "forest");
    h.stream_node("forest");
    assert_eq!(teams(&h), before, "nobody changed sides");
    let updates = h.log[from..]
        .iter()
        .filter(|o| {
            matches!(o, Output::Broadcast { message: ServerMessage::PlayerStateUpdated(_) })
        })
        .count();
    assert_eq!(updates, 0, "no team change to replicate");
}

/// A relaunch is two steps: the older connection's departure, then the login. A transition
/// that waited only for the older connection moves on (here: to its end) before the new one
/// joins, so the new connection is a late join, not one more client to wait for.
#[test]
fn a_relaunch_moves_on_a_transition_that_waited_only_for_the_older_connection() {
    let mut h = Harness::booted();
    let (a, b) = (h.placed("a"), h.placed("b"));
    let t = travel(&mut h, "forest");
    h.stream_node("forest");
    h.ready(b);
    assert_eq!(h.game.snapshot().phase, "WaitingForClients", "a has not reported ready");
    let relaunched = h.login("a");
    assert_eq!(h.closed(a), Some(CloseCode::Replaced));
    assert!(h.ended(t), "nobody left to wait for: b was placed in the spawn window");
    let frozen =
        h.received(relaunched).iter().any(|m| matches!(m, ServerMessage::FreezeCharacters { .. }));
    assert!(!frozen, "the new connection joined after the transition ended");
    assert!(h.shown_join(relaunched).is_some(), "a late join, with a join of its own");
}

/// The advance pass runs a second round when its last step starts a route travel: a travel
/// that came due during a transition starts, and resolves its destination, in the step that
/// ends that transition.
#[test]
fn a_due_route_travel_starts_and_resolves_in_the_step_that_ends_the_transition() {
    let world = with_route(WORLD, &["forest", "harbor"], 2000);
    let mut h = Harness::with(&world, rules());
    h.stream_node("harbor");
    let a = h.placed("a");
    h.advance(Duration::from_secs(2));
    let first = h.transition();
    h.stream_node("forest");
    h.advance(Duration::from_secs(2));
    assert_eq!(h.transition(), first, "the route travel that came due waits");
    let from = h.log.len();
    h.ready(a);
    let second = h.transition();
    assert!(second > first, "the due route travel started in the same step");
    let step = &h.log[from..];
    let at = |f: &dyn Fn(&ServerMessage) -> bool| {
        step.iter().position(|o| matches!(o, Output::Broadcast { message } if f(message)))
    };
    let ended = at(
        &|m| matches!(m, ServerMessage::EndTransition { transition_id } if *transition_id == first),
    );
    let frozen = at(
        &|m| matches!(m, ServerMessage::FreezeCharacters { transition_id } if *transition_id == second),
    );
    let shown = at(
        &|m| matches!(m, ServerMessage::ShowTransition { transition_id, .. } if *transition_id == second),
    );
    assert!(ended.is_some() && ended < frozen && frozen < shown, "{step:?}");
    assert_eq!(h.game.snapshot().phase, "Loading");
}

/// Hazards rest while a transition is in flight: characters are frozen.
#[test]
fn hazards_rest_while_characters_are_frozen() {
    let world = with_hazard(WORLD, HARBOR_POISON);
    let mut h = Harness::with(&world, rules());
    h.stream_node("harbor");
    let a = h.placed("a");
    // A travel back to harbor itself, held in Completing by b, who never acknowledges: the
    // level is streamed and a's pawn stands on the hazard's node, frozen.
    h.input(Input::Travel { node: node("harbor") });
    let b = h.login("b");
    h.stream_node("harbor");
    h.ready(a);
    h.ready(b);
    assert_eq!(h.game.snapshot().phase, "Completing");
    h.advance(Duration::from_secs(3));
    for player in ["a", "b"] {
        let abilities = &h.player(player).abilities;
        assert_eq!(abilities.health(), 100, "no exposure while frozen");
        assert!(!abilities.has_effect(EFFECT_DAMAGE_OVER_TIME_POISON), "not even a paused one");
    }
    h.ack(b);
    assert!(h.game.transition_id().is_none());
    h.advance(Duration::from_millis(1100));
    let hurt = ["a", "b"].iter().filter(|p| h.player(p).abilities.health() < 100).count();
    assert!(hurt > 0, "exposure resumes after the transition");
}

/// A route travel never supersedes: one that comes due during a transition waits for it to
/// end. Otherwise a route shorter than the client-ready timeout would reset a silent client's
/// clock forever and hold everyone's loading screen up.
#[test]
fn a_silent_client_is_kicked_even_when_the_route_is_shorter_than_the_ready_timeout() {
    let world = with_route(WORLD, &["forest", "harbor"], 2000);
    let mut r = rules();
    r.client_ready_timeout = Duration::from_secs(5);
    let mut h = Harness::with(&world, r);
    h.stream_node("harbor");
    let (a, b) = (h.placed("a"), h.placed("b"));
    h.advance(Duration::from_secs(2));
    let t = h.transition();
    h.stream_node("forest");
    h.ready(a);
    // b never reports ready; route travels come due every 2 s meanwhile.
    h.advance(Duration::from_secs(4));
    assert_eq!(h.transition(), t, "the route travel waited; nothing superseded");
    h.advance(Duration::from_secs(1));
    assert_eq!(h.closed(b), Some(CloseCode::ReadyTimeout));
    assert!(h.ended(t));
    assert_eq!(h.game.counters().transitions_superseded, 0);
    assert!(
        h.game.transition_id().is_some_and(|next| next > t),
        "the due route travel started once it ended"
    );
}

/// A client that never acknowledges its pawn is bounded once, not at every travel: under the
/// kick policy it is closed at the settle timeout, and the next transition ends at once.
#[test]
fn a_client_that_never_acknowledges_is_kicked_at_the_settle_timeout() {
    let (mut h, t, a, b) = boot_with_b_unacknowledged(rules());
    h.advance(Duration::from_secs(15));
    assert!(h.ended(t));
    assert_eq!(h.closed(b), Some(CloseCode::ReadyTimeout));
    let next = travel(&mut h, "forest");
    h.stream_node("forest");
    h.ready(a);
    assert!(h.ended(next), "nobody left to wait for");
}

/// Under the proceed policy the silent client stays, but later settle-holds do not wait for
/// it, until it acknowledges a pawn again.
#[test]
fn under_the_proceed_policy_later_transitions_do_not_wait_for_a_client_that_never_acknowledges() {
    let (mut h, t, a, b) = boot_with_b_unacknowledged(proceeding());
    h.advance(Duration::from_secs(15));
    assert!(h.ended(t));
    assert_eq!(h.closed(b), None);
    let next = travel(&mut h, "forest");
    h.stream_node("forest");
    h.ready(a);
    h.ready(b);
    h.advance(Duration::from_millis(100));
    assert!(h.ended(next), "b is excused: no second settle timeout");
    assert_eq!(h.game.counters().settle_timeouts, 1);
    h.ack(b);
    assert!(!h.player("b").placement_excused, "an acknowledgement ends the excuse");
}

/// T9: a client that never acknowledges the pawn of its join is dealt with a settle timeout after
/// that possession, where nobody waits for it: under the kick policy it is closed before the next
/// travel, which then ends without waiting for it (before, it carried its unacknowledged pawn into
/// that travel and held it for a whole settle timeout).
#[test]
fn a_joiner_that_never_acknowledges_is_kicked_before_it_can_hold_a_transition() {
    let mut h = Harness::booted();
    let a = h.placed("a");
    let b = h.login("b");
    h.join_ready(b);
    assert!(h.possessed(b).is_some(), "b was possessed its join's pawn");
    h.advance(Duration::from_millis(14_999));
    assert_eq!(h.closed(b), None, "within a settle timeout of its possession");
    h.advance(Duration::from_millis(1));
    assert_eq!(h.closed(b), Some(CloseCode::ReadyTimeout));
    assert_eq!(h.game.counters().ready_timeouts, 1);
    let next = travel(&mut h, "forest");
    h.stream_node("forest");
    h.ready(a);
    assert!(h.ended(next), "nobody left to wait for");
    assert_eq!(h.game.counters().settle_timeouts, 0);
}

/// T9, the proceed policy: the joiner that never acknowledges stays, excused at its
/// deadline, so the next travel does not wait for its placement; an acknowledgement ends the
/// excuse, and an acknowledged possession has no deadline.
#[test]
fn under_the_proceed_policy_a_joiner_that_never_acknowledges_is_excused_at_its_deadline() {
    let mut h = Harness::with(WORLD, proceeding());
    let boot = h.transition();
    h.stream_node("harbor");
    assert!(h.ended(boot));
    let a = h.placed("a");
    let b = h.login("b");
    h.join_ready(b);
    h.advance(Duration::from_secs(15));
    assert_eq!(h.closed(b), None);
    assert!(h.player("b").placement_excused);
    assert!(!h.game.responses.awaits_acknowledgement(&pid("b")), "its deadline is spent");
    assert!(!h.game.responses.awaits_acknowledgement(&pid("a")), "a acknowledged");
    let next = travel(&mut h, "forest");
    h.stream_node("forest");
    h.ready(a);
    h.ready(b);
    h.advance(Duration::from_millis(100));
    assert!(h.ended(next), "b is excused: no settle timeout");
    assert_eq!(h.game.counters().settle_timeouts, 0);
    h.ack(b);
    assert!(!h.player("b").placement_excused, "an acknowledgement ends the excuse");
}

/// A transition is observed (for the phase and transition histograms) phase by phase, each with
/// its time, and once at its end with its outcome and its whole time.
#[test]
fn a_transition_is_observed_phase_by_phase_and_at_its_end() {
    let mut h = Harness::new();
    let a = h.login("a");
    h.advance(Duration::from_millis(20));
    h.stream_node("harbor");
    h.advance(Duration::from_millis(5));
    h.ready(a);
    h.advance(Duration::from_millis(5));
    h.ack(a);
    let observed: Vec<Observation> = std::iter::from_fn(|| h.game.poll_observation())
        .filter(|o| {
            matches!(o, Observation::PhaseEnded { .. } | Observation::TransitionEnded { .. })
        })
        .collect();
    let ms = Duration::from_millis;
    assert_eq!(
        observed,
        [
            Observation::PhaseEnded { phase: "Freezing", duration: ms(0) },
            Observation::PhaseEnded { phase: "Loading", duration: ms(20) },
            Observation::PhaseEnded { phase: "WaitingForClients", duration: ms(5) },
            Observation::PhaseEnded { phase: "Completing", duration: ms(5) },
            Observation::TransitionEnded {
                outcome: TransitionOutcome::Completed,
                duration: ms(30)
            },
        ]
    );
}

/// The load benchmark (docs/performance.md): each transition that ends is timed from the core's own
/// `now`: start → every client ready (the last ready report) → ended (the last acknowledgement). A
/// travel whose players all keep their pawns (teleported) ends in the step of the last report.
#[test]
fn an_ended_transition_is_timed_from_start_to_last_ready_to_end() {
    let mut h = Harness::new();
    let boot = h.transition();
    let (a, b) = (h.login("a"), h.login("b"));
    h.advance(Duration::from_millis(100));
    h.stream_node("harbor");
    h.advance(Duration::from_millis(30));
    h.ready(a);
    h.advance(Duration::from_millis(20));
    h.ready(b);
    h.advance(Duration::from_millis(7));
    h.ack(a);
    h.advance(Duration::from_millis(5));
    assert!(!h.ended(boot), "b has not acknowledged its pawn yet");
    h.ack(b);
    assert!(h.ended(boot));
    let timings = h.game.snapshot().recent_transition_timings;
    let timing = timings.last().expect("the boot transition's timing");
    assert_eq!(timing.transition_id, boot);
    assert_eq!(timing.players, 2);
    assert_eq!(timing.started_to_all_ready_us, 150_000, "start → b's ready report");
    assert_eq!(timing.all_ready_to_ended_us, 12_000, "b's ready report → b's acknowledgement");
    assert_eq!(timing.whole_us, 162_000);
    assert!(!timing.settle_timed_out);

    let next = travel(&mut h, "forest");
    h.advance(Duration::from_millis(40));
    h.stream_node("forest");
    h.ready(a);
    h.advance(Duration::from_millis(10));
    h.ready(b);
    assert!(h.ended(next), "both kept their pawns: teleported at once");
    let timings = h.game.snapshot().recent_transition_timings;
    assert_eq!(timings.len(), 2, "the boot transition and the travel");
    let timing = timings.last().expect("the travel's timing");
    assert_eq!(timing.transition_id, next);
    assert_eq!(timing.started_to_all_ready_us, 50_000);
    assert_eq!(timing.all_ready_to_ended_us, 0, "ended in the step of the last ready report");
    assert_eq!(timing.whole_us, 50_000);
}

// --- A settle timeout with a teleport still pending (T7: the kept pawn is withdrawn) ---

/// `a` placed on harbor, then a travel to forest whose node streamed but whose spawn points
/// have not registered: Completing, with `a`'s teleport waiting for them.
fn teleport_waiting_for_spawn_points() -> (Harness, TransitionId, ConnectionId, PawnId) {
    let mut h = Harness::booted();
    let a = h.placed("a");
    let pawn = h.possessed(a).expect("a pawn on harbor");
    let t = travel(&mut h, "forest");
    h.finish_stream("node forest");
    h.ready(a);
    assert_eq!(h.game.snapshot().phase, "Completing");
    assert_eq!(h.game.snapshot().pending_spawns.len(), 1, "the teleport waits");
    (h, t, a, pawn)
}

/// Order: the settle timeout, then the spawn points. The transition ends, and the kept pawn
/// whose teleport never ran is withdrawn instead of left on harbor, a level no longer streamed,
/// as the loading screen drops; its player is named unplaced and gets a join of its own, which
/// places it on forest.
#[test]
fn a_settle_timeout_withdraws_a_kept_pawn_whose_teleport_is_still_pending() {
    let (mut h, t, a, pawn) = teleport_waiting_for_spawn_points();
    h.advance(rules().spawn_settle_timeout);
    assert!(h.ended(t));
    assert!(h.received(a).contains(&ServerMessage::PawnDestroyed { pawn_id: pawn }));
    assert_eq!(h.pawns_of("a"), 0, "no pawn left on harbor");
    let snapshot = h.game.snapshot();
    assert_eq!(snapshot.last_settle_timeout_unplaced, vec![pid("a")]);
    assert_eq!(snapshot.counters.pawns_withdrawn, 1);
    assert!(snapshot.pending_spawns.is_empty(), "its teleport was dropped with the pawn");
    let end = h.log.iter().rposition(|o| {
        matches!(o, Output::Broadcast { message: ServerMessage::EndTransition { transition_id } } if *transition_id == t)
    });
    let join = h.log.iter().rposition(
        |o| matches!(o, Output::Send { message: ServerMessage::ShowJoin { .. }, connection } if *connection == a),
    );
    assert!(end.is_some() && end < join, "its own loading screen follows the transition's");
    h.join_ready(a);
    let load = h.game.streaming.streamed_load().expect("forest streamed");
    h.input(Input::SpawnPointsRegistered { load });
    let placed = h.possessed(a).expect("placed by its join");
    assert_ne!(placed, pawn);
    assert_eq!(h.game.roster.pawn(placed).map(|p| p.node.clone()), Some(node("forest")));
}

/// The other order: the spawn points register before the settle timeout; the kept pawn is
/// teleported and nothing is withdrawn.
#[test]
fn a_kept_pawn_whose_spawn_points_register_in_time_is_teleported_not_withdrawn() {
    let (mut h, t, a, pawn) = teleport_waiting_for_spawn_points();
    h.advance(rules().spawn_settle_timeout - Duration::from_millis(1));
    let load = h.game.streaming.streamed_load().expect("forest streamed");
    h.input(Input::SpawnPointsRegistered { load });
    assert!(h.ended(t));
    assert_eq!(h.possessed(a), Some(pawn), "the same pawn, teleported");
    assert_eq!(h.game.roster.pawn(pawn).map(|p| p.node.clone()), Some(node("forest")));
    assert_eq!(h.game.counters().pawns_withdrawn, 0);
    assert_eq!(h.game.counters().settle_timeouts, 0);
}

/// The fuzz case itself: a settle timeout shorter than the spawn retry, with spawn points that
/// vanished without an event (only the retry timer finds them), under the proceed policy. The
/// timeout comes first and withdraws the pawn; the retry then has nothing to move.
#[test]
fn a_settle_timeout_before_the_spawn_retry_leaves_no_pawn_on_the_old_level() {
    let mut r = proceeding();
    r.spawn_settle_timeout = Duration::from_millis(31);
    r.spawn_retry = Duration::from_millis(52);
    let mut h = Harness::with(WORLD, r);
    h.stream_node("harbor");
    let a = h.placed("a");
    let pawn = h.possessed(a).expect("a pawn on harbor");
    let t = travel(&mut h, "forest");
    h.stream_node("forest");
    h.game.streaming.forget_spawn_points();
    h.ready(a);
    assert_eq!(h.game.counters().spawn_point_retries, 1);
    h.advance(Duration::from_millis(31));
    assert!(h.ended(t));
    assert!(h.game.roster.pawn(pawn).is_none(), "withdrawn, not left on harbor");
    h.advance(Duration::from_millis(21));
    assert_eq!(h.game.counters().pawns_teleported, 0, "the retry had nothing to move");
    assert!(h.game.roster.pawns().all(|p| p.node == node("forest")));
}
