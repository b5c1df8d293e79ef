//! The edges of the contract (docs/spec/sessions.md, docs/spec/transitions.md): reconnects, a
//! hard bound on every transition, effects under the loading screen, refusals as documented; and
//! the tests that pin the core's guards (every guard has a test that fails without it:
//! docs/testing.md, "Mutation testing"), each named after what its guard keeps true.

use std::time::Duration;

use gatehouse_protocol::{
    ClientMessage, ErrorCode, PawnId, RejectReason, ServerMessage, TeamId, TransitionFailure,
    TransitionId,
};
use gatehouse_tags::catalog::{
    EFFECT_DAMAGE_OVER_TIME_BURN, EFFECT_DAMAGE_OVER_TIME_POISON, STATE_DEAD,
};

use super::super::spawn::SpawnKind;
use super::*;

fn travel(h: &mut Harness, to: &str) -> TransitionId {
    h.input(Input::Travel { node: node(to) });
    h.transition()
}

fn phase(h: &Harness) -> &'static str {
    h.game.snapshot().phase
}

fn errors(h: &Harness, c: ConnectionId, code: ErrorCode) -> usize {
    h.received(c)
        .iter()
        .filter(|m| matches!(m, ServerMessage::Error { code: x, .. } if *x == code))
        .count()
}

// --- S10: readiness belongs to the connection -----------------------------------------------

/// Readiness belongs to the connection (docs/protocol.md 4.3): a player who relaunches while the
/// server still loads the destination does not inherit its old connection's ready report; the
/// transition waits for the new connection's own. (Once it waits for its clients a relaunch is
/// an arrival instead: `progress.rs`.)
#[test]
fn a_relaunch_while_the_server_loads_reports_ready_for_itself() {
    let mut h = Harness::booted();
    let (a, b) = (h.placed("a"), h.placed("b"));
    travel(&mut h, "forest");
    h.ready(a);
    let relaunched = h.login("a");
    assert!(!h.game.transition.is_arrival(&pid("a")));
    h.stream_node("forest");
    h.ready(b);
    assert_eq!(phase(&h), "WaitingForClients", "the new connection has streamed nothing yet");
    assert!(h.possessed(relaunched).is_none());
    h.ready(relaunched);
    assert_eq!(phase(&h), "Completing");
}

// --- S9: the player state outlives the connection --------------------------------------------

/// docs/spec/sessions.md S9 and S11: death does not launder away through a reconnect: `State.Dead`
/// and the effect that killed the player come back with it, its pawn is a dead one, and only
/// `RestartRequest` clears death.
#[test]
fn a_relaunch_keeps_death_and_the_effect_that_killed_it() {
    let mut h = Harness::booted();
    let a = h.placed("a");
    h.kill("a");
    h.disconnect(a);
    let relaunched = h.joined("a");
    assert!(h.player("a").is_dead(), "State.Dead survives the relaunch");
    assert!(h.player("a").abilities.has_effect(EFFECT_DAMAGE_OVER_TIME_BURN));
    assert_eq!(h.player("a").abilities.health(), 0);
    let pawn = h.possessed(relaunched).expect("a pawn once it streamed");
    assert!(!h.game.roster.pawn(pawn).unwrap().alive, "the relaunched player's pawn is dead");
    let died: Vec<PawnId> = h
        .broadcasts()
        .iter()
        .filter_map(|m| match m {
            ServerMessage::PawnDied { pawn_id } => Some(*pawn_id),
            _ => None,
        })
        .collect();
    assert_eq!(died.last(), Some(&pawn), "every client hears the new pawn is dead");
    assert_eq!(died.len(), 2, "the pawn it died in, and this one; no other spawn dies");
    let tags = h.received(relaunched).iter().any(|m| {
        matches!(m, ServerMessage::AbilityTagsChanged { player_id, tags }
            if player_id.as_str() == "a" && tags.contains(&STATE_DEAD))
    });
    assert!(tags, "the relaunched client hears it is dead");
    h.ack(relaunched);
    h.send(relaunched, ClientMessage::RestartRequest);
    assert!(!h.player("a").is_dead(), "RestartRequest clears death");
    assert_eq!(h.game.counters().player_states_restored, 1);
}

/// Team and kit latches are restored too (docs/protocol.md 4.3): the relaunch keeps the team it
/// had rather than the smaller one, is told once, after `Welcome`, every kit its player holds
/// (so it can rebuild its kit state), and is granted none again.
#[test]
fn a_relaunch_keeps_its_team_and_is_told_its_kits_once() {
    let mut h = Harness::booted();
    let (a, _b, _c) = (h.placed("a"), h.placed("b"), h.placed("c"));
    let held = h.player("a").abilities.granted_kits();
    assert!(!held.is_empty(), "the first life was granted its kits");
    h.game.roster.player_mut(&pid("a")).unwrap().team = TeamId(2);
    h.disconnect(a);
    let relaunched = h.placed("a");
    assert_eq!(h.player("a").team, TeamId(2), "not the smaller team 1");
    let told: Vec<_> = h
        .received(relaunched)
        .iter()
        .filter_map(|m| match m {
            ServerMessage::KitsGranted { kits } => Some(kits.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(told, vec![held.clone()], "told every held kit, once");
    assert_eq!(h.player("a").abilities.granted_kits(), held, "nothing granted twice");
}

/// sessions.md S9: past the retention the player state is gone: a fresh one.
#[test]
fn a_player_state_is_kept_only_for_the_retention() {
    let mut h = Harness::booted();
    let a = h.placed("a");
    h.kill("a");
    h.disconnect(a);
    h.advance(rules().player_state_retention);
    h.joined("a");
    assert!(!h.player("a").is_dead());
    assert_eq!(h.game.counters().player_states_restored, 0);
}

/// Reports naming an issued id the server no longer waits on are ignored, with no `Error`
/// (docs/protocol.md 5): `TransitionReady` and `TransitionShown` for a transition that
/// completed or failed, and a `JoinReady` naming another player's join while it runs (which
/// does not report that player's join either).
#[test]
fn reports_for_ended_transitions_and_other_players_joins_are_ignored() {
    let mut h = Harness::booted();
    let a = h.placed("a");
    let completed = travel(&mut h, "forest");
    h.stream_node("forest");
    h.ready(a);
    assert!(h.ended(completed));

    let b = h.login("b");
    let bs_join = h.shown_join(b).expect("b is in a join of its own");
    let c = h.login("c");
    let ignored_before = h.game.counters().stale_ignored;
    h.send(c, ClientMessage::JoinReady { join_id: bs_join });
    assert_eq!(errors(&h, c, ErrorCode::UnknownJoin), 0);
    assert_eq!(h.game.counters().stale_ignored, ignored_before + 1);
    assert!(h.game.joins.contains(&pid("b")), "b's join still waits for b's own report");

    // Its rooms never stream: the transition fails at its maximum, `a` still connected.
    let failed = travel(&mut h, "crypt");
    h.stream_node("crypt");
    h.ready(a);
    h.advance(rules().transition_max);
    assert_eq!(h.game.counters().transitions_failed, 1);
    let before = h.game.counters().stale_ignored;
    for id in [completed, failed] {
        h.send(a, ClientMessage::TransitionReady { transition_id: id });
        h.send(a, ClientMessage::TransitionShown { transition_id: id });
    }
    assert_eq!(errors(&h, a, ErrorCode::UnknownTransition), 0);
    assert_eq!(h.game.counters().stale_ignored, before + 4);
}

/// A dead player's relaunch is placed like any joiner (docs/protocol.md 4.3): told it is dead
/// and its health after `Welcome`, its dead pawn possessed, its acknowledgement placing it, its
/// join ending with `EndJoin`.
#[test]
fn a_dead_relaunch_is_possessed_acknowledged_and_ends_its_join() {
    let mut h = Harness::booted();
    let a = h.placed("a");
    h.kill("a");
    h.disconnect(a);
    let relaunched = h.login("a");
    let join = h.shown_join(relaunched).expect("a join of its own");
    h.join_ready(relaunched);
    let pawn = h.possessed(relaunched).expect("its dead pawn is possessed");
    assert!(!h.game.roster.pawn(pawn).unwrap().alive);
    h.ack(relaunched);
    assert!(h.player("a").is_placed(), "placed once it acknowledged");
    let got = h.received(relaunched);
    let welcome = got.iter().position(|m| matches!(m, ServerMessage::Welcome { .. })).unwrap();
    let health = got.iter().position(|m| {
        matches!(m, ServerMessage::HealthChanged { player_id, health: 0 } if player_id.as_str() == "a")
    });
    assert!(health.is_some_and(|at| at > welcome), "health 0 after Welcome");
    assert!(
        got.iter().any(|m| matches!(m, ServerMessage::EndJoin { join_id } if *join_id == join))
    );
}

// --- T10: a hard upper bound on every transition ---------------------------------------------

/// docs/spec/transitions.md T10: the travel back after a failed transition goes to the node of the
/// last transition that completed, not to the world's start node.
#[test]
fn a_failed_transition_travels_back_to_the_last_completed_node_not_the_start() {
    let mut h = Harness::booted();
    let a = h.placed("a");
    let forest = travel(&mut h, "forest");
    h.stream_node("forest");
    h.ready(a);
    assert!(h.ended(forest));
    travel(&mut h, "crypt");
    h.stream_node("crypt");
    h.ready(a);
    h.advance(rules().transition_max);
    assert_eq!(h.game.counters().transitions_failed, 1);
    assert_eq!(h.game.snapshot().transition_target, Some(node("forest")));
}

/// A world that cannot load ends (docs/protocol.md 5, "Every transition is bounded"): once
/// `max_failed_transitions` transitions in a row fail at their hard maximum (a travel whose
/// dungeon rooms never stream, then recovery travels whose node never streams), every client is
/// closed with `WorldUnavailable`, the shell is told to stop, no recovery travel follows, and
/// neither a travel nor a login is taken afterwards.
#[test]
fn the_world_is_unavailable_after_max_failed_transitions_in_a_row() {
    // `a` stays however long it waits: only the world's failure closes it.
    let proceeding = GameRules { client_ready_policy: ClientReadyPolicy::Proceed, ..rules() };
    let mut h = Harness::with(WORLD, proceeding);
    h.stream_node("harbor");
    let a = h.placed("a");
    travel(&mut h, "crypt");
    h.stream_node("crypt");
    h.ready(a);
    h.advance(rules().transition_max);
    assert_eq!(h.game.counters().transitions_failed, 1);
    assert!(h.game.transition_id().is_some(), "the first recovery travel");
    h.advance(rules().transition_max);
    assert_eq!(h.game.counters().transitions_failed, 2);
    assert!(h.game.transition_id().is_some(), "the second recovery travel");
    assert_eq!(h.closed(a), None);
    h.advance(rules().transition_max);
    assert_eq!(h.game.counters().transitions_failed, 3);
    assert_eq!(h.game.transition_id(), None, "no recovery after the last failure");
    assert_eq!(h.closed(a), Some(CloseCode::WorldUnavailable));
    assert_eq!(h.game.player_count(), 0, "every player left, saved");
    assert_eq!(h.game.roster.pawns().count(), 0, "no pawn stands on the unloaded level");
    assert!(h.log.iter().any(|o| matches!(o, Output::WorldUnavailable { detail }
        if detail.contains("3 transitions in a row"))));
    let started = h.game.counters().transitions_started;
    h.input(Input::Travel { node: node("forest") });
    assert_eq!(h.game.counters().transitions_started, started, "no travel starts");
    let late = h.login("late");
    assert!(matches!(
        h.received(late).first(),
        Some(ServerMessage::Rejected { reason: RejectReason::ShuttingDown, .. })
    ));
    assert_eq!(h.closed(late), Some(CloseCode::ShuttingDown));
}

/// A transition that ends starts the count of failures in a row again: failures apart from
/// each other never make the world unavailable.
#[test]
fn a_transition_that_ends_starts_the_failure_count_again() {
    let rules = GameRules { max_failed_transitions: 2, ..rules() };
    let mut h = Harness::with(WORLD, rules.clone());
    h.stream_node("harbor");
    let a = h.placed("a");
    for _ in 0..3 {
        travel(&mut h, "crypt");
        h.stream_node("crypt");
        h.ready(a);
        h.advance(rules.transition_max);
        // The recovery travel back to harbor ends.
        let recovery = h.game.transition_id().expect("a recovery travel");
        h.stream_node("harbor");
        h.ready(a);
        assert!(h.ended(recovery));
    }
    assert_eq!(h.game.counters().transitions_failed, 3);
    assert_eq!(h.closed(a), None, "never two failures in a row");
}

/// T10: rooms that never finish streaming hold Completing until the hard maximum;
/// then the transition fails explicitly (`TransitionFailed`, id and reason), nobody is
/// spawned into the unloaded level, it is counted, and the server travels back to the last
/// good node, where everyone is placed again.
#[test]
fn a_transition_that_never_ends_fails_at_its_maximum_and_travels_back() {
    let mut h = Harness::booted();
    let a = h.placed("a");
    let t = travel(&mut h, "crypt");
    h.stream_node("crypt");
    h.ready(a);
    assert_eq!(phase(&h), "Completing");
    h.advance(rules().transition_max - Duration::from_millis(1));
    assert_eq!(h.game.transition_id(), Some(t), "held, extension after extension");
    assert!(h.game.counters().settle_extensions > 0);
    h.advance(Duration::from_millis(1));
    let failed = h.broadcasts().into_iter().find_map(|m| match m {
        ServerMessage::TransitionFailed { transition_id, reason, .. } => {
            Some((transition_id, reason))
        }
        _ => None,
    });
    assert_eq!(failed, Some((t, TransitionFailure::TimedOut)));
    assert!(!h.ended(t), "a failed transition does not end as if it had succeeded");
    assert_eq!(h.game.counters().transitions_failed, 1);
    let crypt = h.game.roster.pawns().any(|p| p.node == node("crypt"));
    assert!(!crypt, "nobody was placed in the unloaded level");
    let recovery = h.transition();
    assert_eq!(h.game.snapshot().transition_target, Some(node("harbor")), "the last good node");
    h.stream_node("harbor");
    h.ready(a);
    assert!(h.ended(recovery), "a's pawn is teleported back: placed, ended");
}

/// T10: Loading is bounded too: a node that never streams fails its transition.
#[test]
fn a_node_that_never_streams_fails_its_transition_at_the_maximum() {
    let mut h = Harness::booted();
    h.placed("a");
    let t = travel(&mut h, "forest");
    assert_eq!(phase(&h), "Loading");
    h.advance(rules().transition_max);
    assert_eq!(h.game.counters().transitions_failed, 1);
    assert_ne!(h.game.transition_id(), Some(t));
}

// --- T12: effects rest under the loading screen -----------------------------------------------

/// How often the poison of [`placed_and_poisoned`] ticks.
const POISON_TICK: Duration = Duration::from_millis(100);

/// A booted harness with `a` placed and poisoned: 5 damage every [`POISON_TICK`] for 1 s.
fn placed_and_poisoned() -> (Harness, ConnectionId) {
    let mut h = Harness::booted();
    let a = h.placed("a");
    h.afflict("a", EFFECT_DAMAGE_OVER_TIME_POISON, POISON_TICK, 5, Duration::from_millis(1000));
    (h, a)
}

/// T12: a finite effect already applied does not tick while characters are frozen
/// (nobody dies behind the loading screen), and resumes with its time left on release.
#[test]
fn finite_effects_pause_while_frozen_and_resume_on_release() {
    let (mut h, a) = placed_and_poisoned();
    let tick = POISON_TICK;
    h.advance(Duration::from_millis(250));
    assert_eq!(h.player("a").abilities.health(), 90);
    let t = travel(&mut h, "forest");
    let wake = h.game.poll_timeout().expect("the transition's own deadlines");
    assert!(wake > h.now + tick, "no effect tick is armed while everyone is frozen");
    h.advance(Duration::from_secs(10));
    assert_eq!(h.player("a").abilities.health(), 90, "no tick behind the loading screen");
    assert!(h.player("a").abilities.has_effect(EFFECT_DAMAGE_OVER_TIME_POISON), "nor expiry");
    h.stream_node("forest");
    h.ready(a);
    assert!(h.ended(t));
    h.advance(Duration::from_millis(50));
    assert_eq!(h.player("a").abilities.health(), 85, "the next tick, 50 ms after release");
    h.advance(Duration::from_secs(2));
    assert_eq!(h.player("a").abilities.health(), 50, "the 7 ticks it had left, and no more");
}

/// The same for a join (docs/protocol.md 4.3): a joiner's effects rest for the length of its own
/// join (its loading screen), while players already in the world keep theirs running; its join's
/// end resumes them.
#[test]
fn a_joiners_effects_rest_for_the_length_of_its_join_only() {
    let mut h = Harness::booted();
    h.placed("a");
    let b = h.login("b");
    assert!(h.shown_join(b).is_some(), "no transition runs: b gets a join of its own");
    assert!(h.player("b").abilities.is_paused(), "frozen by its join");
    assert!(!h.player("a").abilities.is_paused(), "a plays on");
    h.join_ready(b);
    h.ack(b);
    assert!(h.player("b").is_placed());
    assert!(!h.player("b").abilities.is_paused(), "released with its join");
}

/// A relaunch's kept effect (paused while it was away) rests through its join and ticks again
/// once the join releases it: the release re-arms the effects timer (the only effect in play,
/// so nothing else would).
#[test]
fn a_relaunchs_kept_effect_ticks_again_once_its_join_releases_it() {
    let (mut h, a) = placed_and_poisoned();
    h.advance(Duration::from_millis(150));
    assert_eq!(h.player("a").abilities.health(), 95);
    h.disconnect(a);
    let relaunched = h.login("a");
    h.advance(Duration::from_secs(5));
    assert_eq!(h.player("a").abilities.health(), 95, "no tick while away nor during its join");
    h.join_ready(relaunched);
    h.ack(relaunched);
    assert!(!h.player("a").abilities.is_paused(), "released with its join");
    h.advance(Duration::from_millis(50));
    assert_eq!(h.player("a").abilities.health(), 90, "its next tick, 50 ms after release");
}

// --- Refusals as documented (docs/protocol.md 5) -----------------------------------------------

/// T8: `PossessionAcknowledged` for another player's pawn is answered
/// `Error { UnknownPawn }` (docs/protocol.md); for its own old pawn it is ignored.
#[test]
fn an_acknowledgement_of_another_players_pawn_is_refused_unknown_pawn() {
    let mut h = Harness::booted();
    let (a, b) = (h.placed("a"), h.placed("b"));
    let bs = h.possessed(b).unwrap();
    h.send(a, ClientMessage::PossessionAcknowledged { pawn_id: bs });
    assert_eq!(errors(&h, a, ErrorCode::UnknownPawn), 1);
    h.send(a, ClientMessage::PossessionAcknowledged { pawn_id: PawnId(999) });
    assert_eq!(errors(&h, a, ErrorCode::UnknownPawn), 2);
}

/// T8: an acknowledgement of the player's own old pawn (before its respawn) is
/// stale: counted and ignored, no error.
#[test]
fn an_acknowledgement_of_the_players_own_old_pawn_is_ignored_as_stale() {
    let mut h = Harness::booted();
    let a = h.placed("a");
    let old = h.possessed(a).unwrap();
    h.kill("a");
    h.send(a, ClientMessage::RestartRequest);
    h.ack(a);
    assert_ne!(h.possessed(a), Some(old));
    h.send(a, ClientMessage::PossessionAcknowledged { pawn_id: old });
    assert_eq!(h.game.counters().stale_ignored, 1);
    assert_eq!(errors(&h, a, ErrorCode::UnknownPawn), 0);
    assert!(h.player("a").is_placed(), "the stale report unplaces nothing");
}

/// What the server keeps of a player's pawns does not grow with its deaths: it keeps its last
/// `RECENT_PAWNS`; an acknowledgement of the newest old one is still stale (ignored), of one
/// older than those refused `UnknownPawn` (docs/protocol.md 5).
#[test]
fn a_player_keeps_only_its_last_pawns_however_often_it_dies() {
    use super::super::players::RECENT_PAWNS;
    let mut h = Harness::booted();
    let a = h.placed("a");
    let first = h.possessed(a).unwrap();
    let mut previous = first;
    for _ in 0..RECENT_PAWNS + 2 {
        previous = h.possessed(a).unwrap();
        h.kill("a");
        h.send(a, ClientMessage::RestartRequest);
        h.ack(a);
        assert_ne!(h.possessed(a), Some(previous), "a new pawn");
        assert!(h.player("a").is_placed());
    }
    assert_eq!(h.player("a").possessed.len(), RECENT_PAWNS);
    let stale = h.game.counters().stale_ignored;
    h.send(a, ClientMessage::PossessionAcknowledged { pawn_id: previous });
    assert_eq!(h.game.counters().stale_ignored, stale + 1, "the newest old pawn is stale");
    assert_eq!(errors(&h, a, ErrorCode::UnknownPawn), 0);
    h.send(a, ClientMessage::PossessionAcknowledged { pawn_id: first });
    assert_eq!(errors(&h, a, ErrorCode::UnknownPawn), 1, "the first pawn is forgotten");
    assert!(h.player("a").is_placed(), "neither report unplaces anything");
}

/// A relaunch storm of one player (a leaked or replayed token): past the login burst each
/// login is refused `TooManyLogins` before it changes anything (no save load, no broadcast, the
/// connection admitted last stays); once the interval has passed one more is admitted.
#[test]
fn a_relaunch_storm_past_the_login_burst_is_refused_and_changes_nothing() {
    let mut h = Harness::booted();
    let first = h.placed("a");
    let mut last = first;
    for _ in 1..rules().login_burst {
        last = h.login("a");
    }
    assert_eq!(h.closed(first), Some(CloseCode::Replaced));
    let logins = h.game.counters().logins;
    let loads =
        |h: &Harness| h.log.iter().filter(|o| matches!(o, Output::LoadPlayer { .. })).count();
    let (loads_before, broadcasts_before) = (loads(&h), h.broadcasts().len());
    for _ in 0..145 {
        let refused = h.login("a");
        assert!(
            matches!(
                h.received(refused).as_slice(),
                [ServerMessage::Rejected { reason: RejectReason::TooManyLogins, .. }]
            ),
            "{:?}",
            h.received(refused)
        );
        assert_eq!(h.closed(refused), Some(CloseCode::Rejected));
    }
    assert_eq!(h.game.counters().logins, logins, "no refused login counted");
    assert_eq!(loads(&h), loads_before, "no save load");
    assert_eq!(h.broadcasts().len(), broadcasts_before, "no broadcast");
    assert_eq!(h.closed(last), None, "the connection admitted last stays");
    assert_eq!(h.game.roster.connection_of(&pid("a")), Some(last));

    h.advance(rules().login_interval);
    let again = h.login("a");
    assert!(matches!(h.received(again).first(), Some(ServerMessage::Welcome { .. })));
    assert_eq!(h.closed(last), Some(CloseCode::Replaced));
}

/// docs/protocol.md 5: the refusal rate limit is per player: a reconnect does not reset it.
#[test]
fn the_refusal_rate_limit_survives_a_reconnect() {
    let mut h = Harness::booted();
    let a = h.placed("a");
    for _ in 0..5 {
        h.send(a, ClientMessage::RestartRequest);
    }
    assert_eq!(errors(&h, a, ErrorCode::RestartRejected), 5);
    h.disconnect(a);
    let again = h.placed("a");
    h.send(again, ClientMessage::RestartRequest);
    assert_eq!(errors(&h, again, ErrorCode::RestartRejected), 0, "the 6th refusal in the window");
    assert_eq!(errors(&h, again, ErrorCode::RateLimited), 1);
}

// --- The guards, each pinned -----------------------------------------------------------------

/// Guard: spawns are not allowed in WaitingForClients (T6: only Completing is spawnable). A player
/// who joins while the server waits for clients is spawned only in Completing, even once it
/// reported ready itself.
#[test]
fn no_spawn_happens_in_waiting_for_clients() {
    let mut h = Harness::booted();
    let a = h.placed("a");
    travel(&mut h, "forest");
    h.stream_node("forest");
    let late = h.login("late");
    h.ready(late);
    assert_eq!(phase(&h), "WaitingForClients");
    assert!(h.possessed(late).is_none(), "no spawn while waiting for clients");
    assert_eq!(h.game.counters().pawns_teleported, 0);
    h.ready(a);
    assert!(h.possessed(late).is_some(), "spawned once Completing began");
}

/// Guard: a load finishing in Completing pushes the settle deadline to a full timeout after it
/// (T7: the settle timeout counts from the end of the last load). A joiner that logged
/// in while the server loaded the crypt (so the transition waits for it), spawned once the
/// rooms are in and never acknowledging its pawn, stays unplaced with nothing loading.
#[test]
fn a_load_finishing_pushes_the_settle_deadline() {
    let mut h = Harness::booted();
    let a = h.placed("a");
    let t = travel(&mut h, "crypt");
    let late = h.login("late");
    h.stream_node("crypt");
    h.ready(a);
    h.ready(late);
    let settle = rules().spawn_settle_timeout;
    h.advance(settle - Duration::from_secs(1));
    h.finish_stream("dungeon rooms");
    assert!(h.possessed(late).is_some(), "spawned once the rooms are in");
    h.advance(Duration::from_secs(2));
    assert_eq!(h.game.transition_id(), Some(t), "the deadline moved to a timeout after the rooms");
    assert_eq!(h.game.counters().settle_timeouts, 0);
    h.advance(settle);
    assert!(h.ended(t));
    assert_eq!(h.game.counters().settle_timeouts, 1, "late never acknowledged its pawn");
}

/// Guard: a player's save load in flight extends the settle-hold like a streaming load does.
#[test]
fn a_save_load_in_flight_extends_the_settle_hold() {
    let mut h = Harness::booted_holding_loads();
    let a = h.placed_answering_load("a");
    let t = travel(&mut h, "forest");
    // A player (logged in while the server loads the forest, so waited for) whose save is
    // still loading when the spawn window opens: unplaced.
    let late = h.login("late");
    h.stream_node("forest");
    h.ready(late);
    h.ready(a);
    assert_eq!(phase(&h), "Completing");
    h.advance(rules().spawn_settle_timeout);
    assert_eq!(h.game.transition_id(), Some(t), "extended: a save is still loading");
    assert_eq!(h.game.counters().settle_extensions, 1);
    assert_eq!(h.game.counters().settle_timeouts, 0);
}

/// Guard: the request that moves a player who already has a pawn to the transition's node is a
/// teleport (level transition), not an initial spawn.
#[test]
fn the_request_that_moves_an_existing_pawn_is_a_teleport() {
    let mut h = Harness::booted();
    let a = h.placed("a");
    travel(&mut h, "forest");
    let load = h.finish_stream("node forest");
    h.ready(a);
    let pending = h.game.snapshot().pending_spawns;
    assert_eq!(pending.len(), 1, "waiting for the spawn points");
    assert_eq!(pending[0].kind, SpawnKind::LevelTransition);
    h.input(Input::SpawnPointsRegistered { load });
    h.advance(rules().spawn_retry);
    assert_eq!(h.game.counters().pawns_teleported, 1);
}

/// Guard: the discard before travel drops only initial spawns (T4);
/// a respawn queued for the destination survives it.
#[test]
fn the_discard_before_travel_drops_only_initial_spawns() {
    let mut h = Harness::booted();
    let a = h.placed("a");
    h.kill("a");
    h.game.streaming.forget_spawn_points();
    h.send(a, ClientMessage::RestartRequest);
    let pending = h.game.snapshot().pending_spawns;
    assert_eq!(pending.iter().map(|p| p.kind).collect::<Vec<_>>(), vec![SpawnKind::LateJoin]);
    travel(&mut h, "harbor");
    assert_eq!(h.game.counters().initial_spawns_discarded, 0);
    assert_eq!(h.game.snapshot().pending_spawns.len(), 1, "the respawn request is kept");
}

/// Guard: an acknowledgement of a pawn the player no longer possesses does not count as its
/// placement: the transition waits for the acknowledgement of the new pawn.
#[test]
fn an_acknowledgement_of_an_old_pawn_does_not_place_the_player() {
    let mut h = Harness::booted();
    let a = h.placed("a");
    let old = h.possessed(a).unwrap();
    h.kill("a");
    h.send(a, ClientMessage::RestartRequest);
    let new = h.possessed(a).unwrap();
    assert_ne!(old, new);
    h.send(a, ClientMessage::PossessionAcknowledged { pawn_id: old });
    assert!(!h.player("a").is_placed(), "the old pawn's acknowledgement places nothing");
    assert_eq!(errors(&h, a, ErrorCode::UnknownPawn), 0, "stale, not refused");
    h.ack(a);
    assert!(h.player("a").is_placed());
}

/// Guard: a ready report naming a superseded transition is stale: it neither counts for the
/// transition in flight nor is refused.
#[test]
fn a_ready_report_for_a_superseded_transition_counts_for_nothing() {
    let mut h = Harness::booted();
    let (a, b) = (h.placed("a"), h.placed("b"));
    let old = travel(&mut h, "forest");
    travel(&mut h, "harbor");
    h.stream_node("harbor");
    h.send(a, ClientMessage::TransitionReady { transition_id: old });
    h.ready(b);
    assert_eq!(phase(&h), "WaitingForClients", "a's report named the superseded transition");
    assert_eq!(errors(&h, a, ErrorCode::UnknownTransition), 0);
    h.ready(a);
    assert!(h.game.transition_id().is_none(), "both reported: it completes and ends");
}
