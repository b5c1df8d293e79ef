//! Spawning (docs/spec/transitions.md): the world-map gate (T1), honest spawn refusal (T2), the
//! stale-node discard (T4) and the spawn window (T6).
//!
//! A `Symptom "…"` is what a player would see if the guard broke, as the table in
//! docs/spec/transitions.md ("Symptoms") names it.

use std::time::Duration;

use gatehouse_protocol::{ClientMessage, PawnIdRuns, ServerMessage};

use super::*;
use crate::model::SessionSave;
use crate::streaming::LoadId;
use crate::timers::Timer;
use crate::{Observation, SpawnKind, SpawnRefusal};

/// Symptom "Black void on boot": `SpawnDefaultPawnFor` returns nothing while a world map
/// governs the session, no dungeon is active and nothing is streamed.
#[test]
fn the_default_pawn_is_refused_while_a_world_map_governs_and_nothing_is_streamed() {
    let mut h = Harness::new();
    h.login("a");
    assert!(h.game.streaming.streamed_node().is_none());
    assert_eq!(h.game.restart_player_at_player_start(h.now, &pid("a"), &node("harbor")), None);
    assert_eq!(h.pawns_of("a"), 0);
}

/// T1: a requested world-map node is ready only when the currently streamed node matches.
#[test]
fn the_default_pawn_is_refused_on_a_node_other_than_the_streamed_one() {
    let mut h = Harness::booted();
    h.login("a");
    // As if its client had streamed each node: only the server's gate decides here.
    h.client_streamed("a", "forest");
    assert_eq!(h.game.restart_player_at_player_start(h.now, &pid("a"), &node("forest")), None);
    h.client_streamed("a", "harbor");
    assert!(h.game.restart_player_at_player_start(h.now, &pid("a"), &node("harbor")).is_some());
}

/// The server's own gate: the default pawn is refused on a ready level for a player whose
/// client has not reported that node streamed (a pawn never appears before the level it
/// stands on, on any machine: T1).
#[test]
fn the_default_pawn_is_refused_until_the_players_client_streamed_the_node() {
    let mut h = Harness::booted();
    h.login("a");
    assert!(h.game.streaming.is_level_ready_for_spawn(&node("harbor")));
    assert_eq!(h.game.restart_player_at_player_start(h.now, &pid("a"), &node("harbor")), None);
    assert_eq!(h.pawns_of("a"), 0);
    h.client_streamed("a", "harbor");
    assert!(h.game.restart_player_at_player_start(h.now, &pid("a"), &node("harbor")).is_some());
}

/// T1: with no world map managing levels (a standalone map) spawns are allowed.
#[test]
fn a_standalone_map_allows_the_default_pawn_before_anything_streams() {
    let world =
        WORLD.replace("start_node = \"harbor\"", "start_node = \"harbor\"\nworld_map = false");
    let mut h = Harness::with(&world, rules());
    h.login("a");
    h.client_streamed("a", "harbor");
    assert!(h.game.restart_player_at_player_start(h.now, &pid("a"), &node("harbor")).is_some());
}

/// T6: outside Completing, spawn requests queue; OnReadyToSpawn owns the spawn.
#[test]
fn spawn_requests_queue_outside_completing() {
    let mut h = Harness::new();
    let a = h.login("a");
    h.stream_node("harbor");
    assert_eq!(h.game.snapshot().phase, "WaitingForClients");
    assert_eq!(h.game.snapshot().pending_spawns.len(), 1, "queued, not spawned");
    assert!(h.possessed(a).is_none());
    h.ready(a);
    assert!(h.possessed(a).is_some(), "spawned by OnReadyToSpawn in Completing");
}

/// T6: a ready callback arriving during Completing (dungeon rooms streaming after client
/// readiness) spawns directly instead of deferring to an OnReadyToSpawn already past. Also T2:
/// before the rooms are in, the refused spawn stays queued and the player unplaced.
#[test]
fn dungeon_rooms_that_stream_after_readiness_spawn_directly_in_completing() {
    let mut h = Harness::booted();
    let a = h.placed("a");
    h.input(Input::Travel { node: node("crypt") });
    let t = h.transition();
    h.stream_node("crypt");
    h.ready(a);
    let late = h.login("late");
    let snapshot = h.game.snapshot();
    assert_eq!(snapshot.phase, "Completing");
    assert_eq!(
        snapshot.pending_spawns.len(),
        1,
        "a's teleport waits for the rooms; late, arrived in the spawn window, is queued by its \
         own ready report"
    );
    assert!(h.game.counters().spawn_refusals >= 1, "refusals are counted, never treated as spawns");
    assert!(h.possessed(late).is_none());
    h.ready(late);
    assert_eq!(h.game.snapshot().pending_spawns.len(), 2, "late's spawn waits for the rooms");
    assert!(h.possessed(late).is_none(), "the rooms are still streaming");
    h.finish_stream("dungeon rooms");
    assert!(h.possessed(late).is_some(), "spawned directly in Completing by the rooms' callback");
    h.ack(late);
    assert!(h.ended(t));
}

/// T2: `RestartPlayerAtPlayerStart` refused by the gate leaves no pawn, and
/// the request is kept (not dropped as done) until a later ready callback places it.
#[test]
fn a_refused_spawn_is_kept_queued_and_never_counted_as_done() {
    let mut h = Harness::booted();
    h.input(Input::Travel { node: node("crypt") });
    let t = h.transition();
    let a = h.login("a");
    h.stream_node("crypt");
    h.ready(a);
    // Completing: the spawn point is there, but the gate refuses while the rooms stream.
    assert_eq!(h.game.snapshot().phase, "Completing");
    let pending = h.game.snapshot().pending_spawns;
    assert_eq!(pending.len(), 1, "the refused request is kept");
    assert_eq!(pending[0].kind, SpawnKind::Initial);
    assert_eq!(h.game.counters().spawn_refusals, 1);
    assert_eq!(h.pawns_of("a"), 0);
    assert!(!h.game.are_players_placed(), "a refused spawn never counts as placed");
    assert!(!h.ended(t));
    h.finish_stream("dungeon rooms");
    assert_eq!(h.pawns_of("a"), 1, "the kept request spawned once the gate opened");
}

/// A spawn the level-ready gate refuses is one refusal in the metrics as in the counters (it
/// was observed twice, so `gatehouse_spawn_refusals_by_cause_total{cause="level_not_ready"}`
/// counted double).
#[test]
fn a_refused_spawn_is_observed_once_as_it_is_counted_once() {
    let mut h = Harness::booted();
    h.input(Input::Travel { node: node("crypt") });
    let a = h.login("a");
    h.stream_node("crypt");
    h.ready(a);
    assert_eq!(h.game.counters().spawn_refusals, 1, "refused while the rooms stream");
    h.send(a, ClientMessage::RestartRequest);
    assert_eq!(h.game.counters().spawn_refusals, 1, "an unrelated input attempts nothing");
    let refusal = Observation::SpawnRefused { cause: SpawnRefusal::LevelNotReady };
    let observed = std::iter::from_fn(|| h.game.poll_observation()).filter(|o| *o == refusal);
    assert_eq!(observed.count(), 1, "one refusal, one observation");
}

/// A placed spawn request is observed (for the spawn-wait histogram) once, with its time in
/// the queue; the transition that placed it is counted completed.
#[test]
fn a_placed_spawn_is_observed_with_its_time_in_the_queue() {
    let mut h = Harness::new();
    let boot = h.transition();
    let a = h.login("a");
    h.advance(Duration::from_millis(30));
    h.stream_node("harbor");
    h.ready(a);
    let placed: Vec<Observation> = std::iter::from_fn(|| h.game.poll_observation())
        .filter(|o| matches!(o, Observation::SpawnPlaced { .. }))
        .collect();
    assert_eq!(placed, [Observation::SpawnPlaced { waited: Duration::from_millis(30) }]);
    h.ack(a);
    assert!(h.ended(boot));
    assert_eq!(h.game.counters().transitions_completed, 1);
}

/// T2: a spawn that finds no spawn point yet is re-queued, and the registration is the event
/// that runs it, no retry poll. Order: every client ready, then the spawn points register.
#[test]
fn a_spawn_waiting_for_spawn_points_runs_when_they_register() {
    let mut h = Harness::new();
    let t = h.transition();
    let a = h.login("a");
    let load = h.finish_stream("node harbor");
    h.ready(a);
    assert!(h.possessed(a).is_none(), "no spawn point registered yet");
    assert_eq!(h.game.snapshot().pending_spawns.len(), 1, "kept until they register");
    assert!(h.game.timers.deadline(Timer::SpawnRetry).is_none(), "no retry poll armed");
    h.input(Input::SpawnPointsRegistered { load });
    assert!(h.possessed(a).is_some(), "spawned at the registration, at the same instant");
    assert_eq!(h.game.counters().spawn_point_retries, 0);
    h.ack(a);
    assert!(h.ended(t));
}

/// The other order: the spawn points register before every client is ready; the ready report
/// spawns at once.
#[test]
fn a_spawn_after_its_spawn_points_registered_runs_at_once() {
    let mut h = Harness::new();
    let t = h.transition();
    let a = h.login("a");
    let load = h.finish_stream("node harbor");
    h.input(Input::SpawnPointsRegistered { load });
    h.ready(a);
    assert!(h.possessed(a).is_some());
    assert_eq!(h.game.counters().spawn_point_retries, 0);
    h.ack(a);
    assert!(h.ended(t));
}

/// A registration reported for a load that is not the streamed node's (a superseded travel) is
/// ignored: it neither registers nor wakes anything.
#[test]
fn a_stale_spawn_point_registration_is_ignored() {
    let mut h = Harness::new();
    let a = h.login("a");
    let load = h.finish_stream("node harbor");
    h.ready(a);
    h.input(Input::SpawnPointsRegistered { load: LoadId(load.0 + 100) });
    assert!(h.possessed(a).is_none(), "another load's spawn points are not these");
    h.input(Input::SpawnPointsRegistered { load });
    assert!(h.possessed(a).is_some());
}

/// T2: the retry timer only for what no event announces. Spawn points that are
/// gone without an event (the test hook) requeue the spawn with the 100 ms retry.
#[test]
fn spawn_points_gone_without_an_event_are_retried_on_the_timer() {
    let mut h = Harness::new();
    let t = h.transition();
    let a = h.login("a");
    h.stream_node("harbor");
    h.game.streaming.forget_spawn_points();
    h.ready(a);
    assert!(h.possessed(a).is_none(), "no spawn point");
    assert_eq!(h.game.counters().spawn_point_retries, 1);
    h.advance(Duration::from_millis(99));
    assert_eq!(h.game.snapshot().pending_spawns.len(), 1);
    // Registered again, silently; the retry finds them.
    let load = h.game.streaming.streamed_load().unwrap();
    assert!(h.game.streaming.spawn_points_registered(load));
    assert!(h.possessed(a).is_none(), "the hook is silent: only the timer wakes the queue");
    h.advance(Duration::from_millis(1));
    assert!(h.possessed(a).is_some(), "the 100 ms retry spawned it");
    h.ack(a);
    assert!(h.ended(t));
}

/// Symptom "Player spawns at the wrong (previous) node after relaunch": the initial spawn
/// captured at login names the stale start node; the session save resolves another node;
/// the stale request is discarded right before travel and the player is re-queued against the
/// resolved node, so the transition ends on its own (no settle timeout) with the pawn there.
#[test]
fn stale_initial_spawns_are_discarded_before_travel_and_requeued_against_the_resolved_node() {
    let mut h = Harness::holding_loads(WORLD);
    let t = h.transition();
    let a = h.login("a");
    h.answer_load("a", LoadOutcome::NotFound);
    let pending = h.game.snapshot().pending_spawns;
    assert_eq!(
        (pending[0].kind, pending[0].node.clone()),
        (SpawnKind::Initial, node("harbor")),
        "captured the stale node"
    );
    h.answer_session(LoadOutcome::Found(SessionSave {
        session: "main".into(),
        node: node("forest"),
        version: 3,
    }));
    assert_eq!(h.game.counters().initial_spawns_discarded, 1);
    assert!(h.game.snapshot().pending_spawns.is_empty());
    h.stream_node("forest");
    h.ready(a);
    let spawned = h.received(a).iter().find_map(|m| match m {
        ServerMessage::PawnSpawned(v) => Some(v.node.clone()),
        _ => None,
    });
    assert_eq!(spawned, Some(node("forest")));
    h.ack(a);
    assert!(h.ended(t));
    assert_eq!(h.game.counters().settle_timeouts, 0);
}

/// T4: a player who already received a match-start default pawn is covered too: the re-queue
/// produces a LevelTransition (teleport) request for it rather than a second spawn.
#[test]
fn a_player_who_already_has_a_pawn_is_teleported_not_spawned_twice() {
    let mut h = Harness::booted();
    let a = h.placed("a");
    let pawn = h.possessed(a).unwrap();
    h.input(Input::Travel { node: node("forest") });
    h.stream_node("forest");
    h.ready(a);
    assert_eq!(h.pawns_of("a"), 1);
    assert_eq!(h.game.counters().pawns_spawned, 1);
    let pawn_ids = PawnIdRuns::from_ids([pawn]);
    let teleported = ServerMessage::PawnsTeleported { node: node("forest"), pawn_ids };
    assert!(h.broadcasts().contains(&teleported));
}

/// Every pawn a spawn pass moves to a node is replicated in one
/// `PawnsTeleported`, not one message per player; consecutive pawn ids go as one run (protocol 6).
#[test]
fn a_transitions_teleports_go_out_in_one_message() {
    let mut h = Harness::booted();
    let players: Vec<_> = ["a", "b", "c"].iter().map(|p| h.placed(p)).collect();
    let pawns: Vec<_> = players.iter().map(|c| h.possessed(*c).unwrap()).collect();
    h.input(Input::Travel { node: node("forest") });
    h.stream_node("forest");
    for c in &players {
        h.ready(*c);
    }
    let teleports: Vec<_> = h
        .broadcasts()
        .into_iter()
        .filter(|m| matches!(m, ServerMessage::PawnsTeleported { .. }))
        .collect();
    let pawn_ids = PawnIdRuns::from_ids(pawns);
    assert_eq!(pawn_ids.runs().len(), 1, "three pawns spawned in a row are one run");
    assert_eq!(teleports, vec![ServerMessage::PawnsTeleported { node: node("forest"), pawn_ids }]);
}

/// More runs than one message carries come in several, each within the limit, none lost: every
/// second player left, so each kept pawn is a run of its own.
#[test]
fn teleports_beyond_one_messages_limit_come_in_several() {
    let per_message = gatehouse_protocol::MAX_TELEPORT_RUNS_PER_MESSAGE;
    let mut h = Harness::with(WORLD, GameRules { max_players: 2 * per_message + 2, ..rules() });
    let boot = h.transition();
    h.stream_node("harbor");
    assert!(h.ended(boot));
    let players: Vec<_> = (0..2 * per_message + 2).map(|i| h.placed(&format!("p{i}"))).collect();
    let kept: Vec<_> = players.iter().copied().step_by(2).collect();
    for c in players.iter().copied().skip(1).step_by(2) {
        h.disconnect(c);
    }
    h.input(Input::Travel { node: node("forest") });
    h.stream_node("forest");
    for c in &kept {
        h.ready(*c);
    }
    let sizes: Vec<(usize, usize)> = h
        .broadcasts()
        .into_iter()
        .filter_map(|m| match m {
            ServerMessage::PawnsTeleported { pawn_ids, .. } => {
                Some((pawn_ids.runs().len(), pawn_ids.len()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(sizes, vec![(per_message, per_message), (1, 1)]);
    assert_eq!(h.game.counters().pawns_teleported, per_message as u64 + 1);
}

/// A late join while the level is ready spawns at once; while the world is travelling it
/// queues and is placed by the travel.
#[test]
fn a_login_during_loading_is_placed_by_the_travel_not_before() {
    let mut h = Harness::booted();
    h.input(Input::Travel { node: node("forest") });
    let t = h.transition();
    let a = h.login("a");
    assert!(h.possessed(a).is_none());
    h.stream_node("forest");
    h.ready(a);
    h.ack(a);
    assert!(h.ended(t));
}

/// Spawn kinds log (the `spawn_request` span's `kind`) as their snake_case names.
#[test]
fn spawn_kinds_log_as_their_names() {
    let names: Vec<String> = [SpawnKind::Initial, SpawnKind::LateJoin, SpawnKind::LevelTransition]
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(names, ["initial", "late_join", "level_transition"]);
}

/// The snapshot's `load_in_flight` is true while either kind of load runs: streaming, or a
/// save load.
#[test]
fn the_snapshot_shows_a_load_in_flight_for_streaming_or_a_save() {
    let mut h = Harness::holding_loads(WORLD);
    assert!(h.game.snapshot().load_in_flight, "the session save loads; nothing streams yet");
    h.answer_session(LoadOutcome::NotFound);
    assert!(h.game.snapshot().load_in_flight, "the boot node streams; no save loads");
    h.stream_node("harbor");
    assert!(!h.game.snapshot().load_in_flight);
}
