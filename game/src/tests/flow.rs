//! The walking-skeleton flow: boot travel, login during a transition, late join, disconnect.

use std::time::Duration;

use gatehouse_protocol::{ClientMessage, CloseCode, ErrorCode, ServerMessage, TransitionId};

use super::*;

/// A player who logs in during a transition is shown it (id, target node, levels) and frozen.
#[test]
fn login_during_a_transition_is_shown_it_and_frozen() {
    let mut h = Harness::new();
    let boot = h.transition();
    let c = h.login("p1");
    let got = h.received(c);
    assert!(
        matches!(&got[0], ServerMessage::Welcome { player_id, .. } if player_id.as_str() == "p1")
    );
    assert!(got.contains(&ServerMessage::FreezeCharacters { transition_id: boot }));
    let shown = got.iter().find_map(|m| match m {
        ServerMessage::ShowTransition { transition_id, target_node, levels, .. } => {
            Some((*transition_id, target_node.clone(), levels.len()))
        }
        _ => None,
    });
    assert_eq!(shown, Some((boot, node("harbor"), 2)));
}

/// The boot transition: stream, every client ready, a pawn each in Completing, acknowledged
/// possession, and only then the end.
#[test]
fn the_boot_transition_ends_only_once_every_player_acknowledged_its_pawn() {
    let mut h = Harness::new();
    let boot = h.transition();
    let (a, b) = (h.login("a"), h.login("b"));
    h.stream_node("harbor");
    h.ready(a);
    assert!(h.possessed(a).is_none(), "no spawn before every client is ready");
    h.ready(b);
    assert!(h.possessed(a).is_some() && h.possessed(b).is_some(), "spawned in Completing");
    h.ack(a);
    assert!(!h.ended(boot), "b has not acknowledged its pawn yet");
    h.ack(b);
    assert!(h.ended(boot));
    assert_eq!(h.pawns_of("a"), 1);
    assert_eq!(h.pawns_of("b"), 1);
}

/// docs/spec/sessions.md S5 (and docs/spec/transitions.md T1: never a pawn before its level, on any
/// machine): a player who logs in while no transition runs is told the current node's levels in a
/// join of its own, gets its pawn only once it reported them streamed, and its join ends once it
/// acknowledged the pawn. Nobody else is frozen for it.
#[test]
fn a_joiner_streams_the_current_node_before_it_gets_a_pawn() {
    let mut h = Harness::booted();
    let a = h.placed("a");
    let c = h.login("late");
    let got = h.received(c);
    let join = got.iter().find_map(|m| match m {
        ServerMessage::ShowJoin { join_id, node, levels, rooms } => {
            Some((*join_id, node.clone(), levels.len(), rooms.len()))
        }
        _ => None,
    });
    let (join_id, shown, levels, rooms) = join.expect("a join shown to the joiner");
    assert_eq!((shown, levels, rooms), (node("harbor"), 2, 0));
    assert!(h.possessed(c).is_none(), "no pawn before the joiner streamed");
    assert!(!h.received(a).iter().any(|m| matches!(m, ServerMessage::FreezeCharacters { .. })));
    assert_eq!(h.game.transition_id(), None, "nobody else is frozen for a join");
    assert_eq!(h.game.counters().joins_started, 2, "a's and late's");
    h.advance(Duration::from_secs(5));
    assert!(h.possessed(c).is_none(), "still no pawn while it streams");
    h.join_ready(c);
    assert!(h.possessed(c).is_some(), "its pawn once it streamed");
    let spawned = h.received(c).iter().find_map(|m| match m {
        ServerMessage::PawnSpawned(v) if v.owner.as_str() == "late" => Some(v.node.clone()),
        _ => None,
    });
    assert_eq!(spawned, Some(node("harbor")));
    assert!(!h.received(c).contains(&ServerMessage::EndJoin { join_id }), "not before the ack");
    h.ack(c);
    assert_eq!(h.received(c).last(), Some(&ServerMessage::EndJoin { join_id }));
    assert!(!h.received(a).contains(&ServerMessage::EndJoin { join_id }), "the joiner's alone");
    assert_eq!(h.game.counters().joins_completed, 2, "a's and late's");
}

/// S5: the rooms of a dungeon are named in the join too.
#[test]
fn a_joiner_on_a_dungeon_is_told_its_rooms() {
    let mut h = Harness::booted();
    h.input(Input::Travel { node: node("crypt") });
    let t = h.transition();
    h.stream_node("crypt");
    h.finish_stream("dungeon rooms");
    assert!(h.ended(t), "nobody to wait for");
    let c = h.login("late");
    let rooms = h.received(c).iter().find_map(|m| match m {
        ServerMessage::ShowJoin { rooms, .. } => Some(rooms.clone()),
        _ => None,
    });
    assert_eq!(rooms.map(|r| r.len()), Some(1));
}

/// A transition to a dungeon names its rooms, as a join there does (docs/protocol.md 5,
/// `ShowTransition`): whoever is shown it, present at the start or logging in during it, can
/// stream the levels and then the rooms before reporting ready. A plain node names none.
#[test]
fn a_transition_to_a_dungeon_names_its_rooms() {
    let mut h = Harness::booted();
    let present = h.placed("present");
    let to_crypt = {
        h.input(Input::Travel { node: node("crypt") });
        h.transition()
    };
    h.stream_node("crypt");
    let arriving = h.login("arriving");
    let shown_rooms = |h: &Harness, c| {
        h.received(c).iter().rev().find_map(|m| match m {
            ServerMessage::ShowTransition { transition_id, rooms, .. }
                if *transition_id == to_crypt =>
            {
                Some(rooms.iter().map(|r| r.as_str().to_owned()).collect::<Vec<_>>())
            }
            _ => None,
        })
    };
    assert_eq!(shown_rooms(&h, present), Some(vec!["crypt_hall".to_owned()]));
    assert_eq!(shown_rooms(&h, arriving), Some(vec!["crypt_hall".to_owned()]));
    let received = h.received(present);
    let boot_rooms = received.iter().find_map(|m| match m {
        ServerMessage::ShowTransition { transition_id, rooms, .. }
            if *transition_id != to_crypt =>
        {
            Some(rooms.len())
        }
        _ => None,
    });
    assert!(boot_rooms.is_none_or(|n| n == 0), "a plain node has no rooms");
}

/// `Welcome` tells the client the server's frame limit (docs/protocol.md 2), which it accepts
/// from then on and never exceeds.
#[test]
fn a_welcome_tells_the_servers_frame_limit() {
    let rules = GameRules { max_frame_len: 12_345, ..rules() };
    let mut h = Harness::with(WORLD, rules);
    let c = h.login("p1");
    assert!(
        matches!(h.received(c).first(), Some(ServerMessage::Welcome { max_frame_len: 12_345, .. })),
        "{:?}",
        h.received(c).first()
    );
}

/// S6: a transition starting during a join supersedes it: the joiner follows the
/// transition, and a report for the old join is stale.
#[test]
fn a_transition_supersedes_a_join_and_the_joiner_follows_it() {
    let mut h = Harness::booted();
    let c = h.login("late");
    let join_id = h.shown_join(c).unwrap();
    h.input(Input::Travel { node: node("forest") });
    let t = h.transition();
    assert!(h.received(c).contains(&ServerMessage::FreezeCharacters { transition_id: t }));
    h.send(c, ClientMessage::JoinReady { join_id });
    assert!(h.possessed(c).is_none(), "the old join's report places nothing");
    assert_eq!(h.game.counters().stale_ignored, 1, "counted as stale, not refused");
    h.stream_node("forest");
    h.ready(c);
    h.ack(c);
    assert!(h.ended(t));
    assert!(!h.received(c).contains(&ServerMessage::EndJoin { join_id }));
}

/// Disconnect while WaitingForClients removes the player from the ready set at once.
#[test]
fn a_disconnect_while_waiting_for_clients_does_not_wedge_the_transition() {
    let mut h = Harness::new();
    let boot = h.transition();
    let (a, b) = (h.login("a"), h.login("b"));
    h.stream_node("harbor");
    h.ready(a);
    h.disconnect(b);
    assert!(h.possessed(a).is_some(), "Completing began once the only other client left");
    h.ack(a);
    assert!(h.ended(boot));
    assert_eq!(h.pawns_of("b"), 0);
}

/// A disconnect removes the player and its pawn, and everyone hears of it.
#[test]
fn a_disconnect_removes_the_player_and_its_pawn() {
    let mut h = Harness::booted();
    let (a, b) = (h.joined("a"), h.joined("b"));
    assert_eq!(h.game.player_count(), 2);
    let pawn = h.possessed(b).unwrap();
    h.disconnect(b);
    assert_eq!(h.pawns_of("b"), 0);
    let got = h.received(a);
    assert!(got.contains(&ServerMessage::PawnDestroyed { pawn_id: pawn }));
    assert!(got.contains(&ServerMessage::PlayerLeft { player_id: pid("b") }));
    assert_eq!(h.game.player_count(), 1);
}

/// The world's route travels at its interval with everyone connected.
#[test]
fn the_route_travels_at_its_interval() {
    let world = with_route(WORLD, &["forest"], 15000);
    let mut h = Harness::with(&world, rules());
    h.stream_node("harbor");
    let a = h.placed("a");
    h.advance(Duration::from_millis(14_999));
    assert!(h.game.transition_id().is_none());
    h.advance(Duration::from_millis(1));
    let t = h.transition();
    assert!(h.received(a).contains(&ServerMessage::FreezeCharacters { transition_id: t }));
}

/// The route visits its nodes in turn and starts again after the last.
#[test]
fn the_route_visits_its_nodes_in_turn_and_wraps() {
    let world = with_route(WORLD, &["forest", "harbor"], 1000);
    let mut h = Harness::with(&world, rules());
    h.stream_node("harbor");
    let a = h.placed("a");
    let mut targets = Vec::new();
    for _ in 0..3 {
        h.advance(Duration::from_millis(1000));
        let target = h.game.snapshot().transition_target.expect("a route travel");
        h.stream_node(target.as_str());
        h.ready(a);
        assert!(h.game.transition_id().is_none(), "the travel to {target} ended");
        targets.push(target);
    }
    assert_eq!(targets, [node("forest"), node("harbor"), node("forest")]);
}

/// A second connection of the same player replaces the first: one player, one pawn.
#[test]
fn a_relaunch_replaces_the_older_connection() {
    let mut h = Harness::booted();
    let old = h.joined("a");
    let new = h.joined("a");
    assert_eq!(h.closed(old), Some(CloseCode::Replaced));
    assert_eq!(h.game.player_count(), 1);
    assert_eq!(h.pawns_of("a"), 1);
    assert!(h.possessed(new).is_some());
    assert_eq!((h.game.counters().logins, h.game.counters().logins_replaced), (2, 1));
}

/// Beyond the player cap a login is refused with ServerFull and closed; others are unaffected.
#[test]
fn a_login_beyond_the_cap_is_refused() {
    let mut r = rules();
    r.max_players = 1;
    let mut h = Harness::with(WORLD, r);
    let a = h.login("a");
    let b = h.login("b");
    assert_eq!(h.closed(b), Some(CloseCode::ServerFull));
    assert_eq!(h.closed(a), None);
    assert_eq!(h.game.player_count(), 1);
    h.login("c");
    assert_eq!(h.game.counters().logins_refused_full, 2, "counted, each refusal");
}

/// A ready report naming a transition never started is refused to its sender only.
#[test]
fn a_ready_report_for_an_unknown_transition_is_refused() {
    let mut h = Harness::new();
    let a = h.login("a");
    h.send(a, ClientMessage::TransitionReady { transition_id: TransitionId(99) });
    assert!(
        h.received(a)
            .iter()
            .any(|m| matches!(m, ServerMessage::Error { code: ErrorCode::UnknownTransition, .. }))
    );
    assert_eq!(h.game.counters().client_errors, 1);
}

/// A ready report for a transition that has ended, sent once none runs, is stale: counted and
/// ignored, never an error.
#[test]
fn a_ready_report_after_its_transition_ended_is_ignored_as_stale() {
    let mut h = Harness::new();
    let a = h.login("a");
    let boot = h.transition();
    h.stream_node("harbor");
    h.ready(a);
    h.ack(a);
    assert!(h.ended(boot));
    h.send(a, ClientMessage::TransitionReady { transition_id: boot });
    assert_eq!(h.game.counters().stale_ignored, 1);
    assert_eq!(h.game.counters().client_errors, 0);
    assert!(!h.received(a).iter().any(|m| matches!(m, ServerMessage::Error { .. })));
}

/// Refused requests are answered a few times per window, then rate-limited once, then dropped;
/// a client that keeps going is closed for abuse. Nobody else is affected.
#[test]
fn refused_requests_are_rate_limited_then_closed_for_abuse() {
    let mut h = Harness::booted();
    let (a, b) = (h.login("a"), h.login("b"));
    for _ in 0..super::super::players::RefusalWindow::CLOSE_AT {
        h.send(a, ClientMessage::RestartRequest);
    }
    let errors: Vec<ErrorCode> = h
        .received(a)
        .iter()
        .filter_map(|m| match m {
            ServerMessage::Error { code, .. } => Some(*code),
            _ => None,
        })
        .collect();
    let answered = super::super::players::RefusalWindow::ANSWERED as usize;
    assert_eq!(errors.len(), answered + 1);
    assert_eq!(errors[answered], ErrorCode::RateLimited);
    assert_eq!(h.closed(a), Some(CloseCode::Abuse));
    assert_eq!(h.closed(b), None);
    assert_eq!(h.game.player_count(), 1);
}

/// After the window the budget resets.
#[test]
fn the_refusal_budget_resets_after_its_window() {
    let mut h = Harness::booted();
    let a = h.login("a");
    for _ in 0..10 {
        h.send(a, ClientMessage::RestartRequest);
    }
    h.advance(super::super::players::RefusalWindow::WINDOW);
    h.send(a, ClientMessage::RestartRequest);
    let last = h.received(a).into_iter().rev().find(|m| matches!(m, ServerMessage::Error { .. }));
    assert!(matches!(last, Some(ServerMessage::Error { code: ErrorCode::RestartRejected, .. })));
}

/// A refusal window opens at the first refusal and lasts 10 s from there, not on a fixed grid
/// (docs/protocol.md 5): refusals 9 s after a quiet start still share the first one's window,
/// and the ones dropped silently count toward the 50th, which closes for abuse.
#[test]
fn a_refusal_window_opens_at_the_first_refusal_and_dropped_refusals_count() {
    let mut h = Harness::booted();
    let a = h.login("a");
    h.advance(Duration::from_secs(7));
    h.send(a, ClientMessage::RestartRequest);
    h.advance(Duration::from_secs(9));
    for _ in 0..48 {
        h.send(a, ClientMessage::RestartRequest);
    }
    assert_eq!(h.closed(a), None, "49 refusals in the window");
    h.send(a, ClientMessage::RestartRequest);
    assert_eq!(h.closed(a), Some(CloseCode::Abuse), "the 50th, 9 s after the first");
}

/// `PlayerLeft` says the player is out of the world, not that its player state is gone: when it
/// relaunches within the retention, the others hear it announced again, with its kept state
/// (docs/protocol.md 5).
#[test]
fn a_player_that_left_and_relaunched_is_announced_again() {
    let mut h = Harness::booted();
    let (a, b) = (h.placed("a"), h.placed("b"));
    h.disconnect(a);
    let left = h.received(b).iter().position(
        |m| matches!(m, ServerMessage::PlayerLeft { player_id } if player_id.as_str() == "a"),
    );
    let left = left.expect("b hears a left");
    h.placed("a");
    let back = h.received(b).iter().skip(left).any(
        |m| matches!(m, ServerMessage::PlayerStateUpdated(view) if view.player_id.as_str() == "a"),
    );
    assert!(back, "b hears a is back");
    assert_eq!(h.game.counters().player_states_restored, 1, "with the state it left");
}

/// The gauges the metrics scrape reads (placed players, pending spawn requests, loads in
/// flight) count what the game holds at that moment, up and down.
#[test]
fn the_scrape_gauges_count_placed_players_pending_spawns_and_loads_in_flight() {
    let mut h = Harness::new();
    let a = h.login("a");
    assert_eq!(h.game.load_count(), 1, "the boot node is streaming");
    assert!(h.game.snapshot().load_in_flight);
    h.stream_node("harbor");
    assert_eq!(h.game.load_count(), 0);
    assert!(!h.game.snapshot().load_in_flight, "the saves settled and nothing streams");
    assert_eq!(h.game.pending_spawn_count(), 1, "a's spawn waits for Completing");
    assert_eq!(h.game.placed_player_count(), 0);
    h.ready(a);
    assert_eq!(h.game.pending_spawn_count(), 0);
    h.ack(a);
    assert_eq!(h.game.placed_player_count(), 1);
    h.login("b");
    assert_eq!((h.game.player_count(), h.game.placed_player_count()), (2, 1));
    assert_eq!(h.game.snapshot().unplaced_players, [pid("b")]);
}

/// What clients know of the world: every replicated change the core broadcast so far, applied
/// in order (what a shell greets a newcomer with, docs/protocol.md 4.5).
fn known_world(h: &Harness) -> crate::KnownWorld {
    let mut known = crate::KnownWorld::default();
    for message in h.broadcasts() {
        if let Ok(change) = gatehouse_protocol::ReplicatedChange::from_message(message) {
            known.apply(&change);
        }
    }
    known
}

/// A newcomer's world costs it a few frames, not one per player and pawn: 600 placed players
/// under the smallest frame limit (8 KiB) come in a handful of `WorldSnapshot`s, each within
/// the limit, that together name every player and pawn once (docs/protocol.md 4.5).
#[test]
fn a_newcomer_gets_the_world_in_a_few_frames_whatever_its_size() {
    let mut h = Harness::with(WORLD, GameRules { max_players: 700, ..rules() });
    let boot = h.transition();
    h.stream_node("harbor");
    assert!(h.ended(boot));
    let players = 600;
    for i in 0..players {
        h.placed(&format!("p{i:03}"));
    }
    let messages = known_world(&h).messages(8_192);
    let snapshots: Vec<_> = messages
        .iter()
        .filter_map(|m| match m {
            ServerMessage::WorldSnapshot(snapshot) => Some(snapshot),
            _ => None,
        })
        .collect();
    assert_eq!(snapshots.len(), messages.len(), "snapshots only: {messages:?}");
    assert!((2..=4).contains(&snapshots.len()), "{} snapshots", snapshots.len());
    for message in &messages {
        let frame = gatehouse_protocol::encode_frame(message, 8_192);
        assert!(frame.is_ok(), "a snapshot past the frame limit: {frame:?}");
    }
    let players_heard: usize = snapshots.iter().map(|s| s.player_count()).sum();
    let pawns_heard: usize = snapshots.iter().map(|s| s.pawn_count()).sum();
    assert_eq!((players_heard, pawns_heard), (players, players));
}

/// What a client that logs in is greeted with, built from the core's broadcasts alone (one
/// `WorldSnapshot`, docs/protocol.md 4.5): each player state, with its ability tags and health
/// only where they are not the defaults, and each pawn, a dead one followed by its `PawnDied`.
/// The core itself sends a newcomer nothing of the world but its `Welcome`.
#[test]
fn a_new_client_hears_every_player_state_and_pawn_already_replicated() {
    let mut h = Harness::booted();
    let a = h.placed("a");
    let b = h.placed("b");
    h.kill("a");
    let (dead, alive) = (h.possessed(a).unwrap(), h.possessed(b).unwrap());
    let messages = known_world(&h).messages(65_536);
    let snapshots: Vec<_> = messages
        .iter()
        .map_while(|m| match m {
            ServerMessage::WorldSnapshot(snapshot) => Some(snapshot),
            _ => None,
        })
        .collect();
    assert_eq!((snapshots.len(), messages.len()), (1, 1), "two players fit one message");
    let heard: Vec<ServerMessage> = snapshots.iter().flat_map(|s| s.messages()).collect();
    let c = h.login("c");
    let greeted = h.received(c);
    assert!(matches!(greeted.first(), Some(ServerMessage::Welcome { .. })));
    assert!(!greeted.iter().any(|m| matches!(m, ServerMessage::WorldSnapshot(_))));
    let states: Vec<PlayerId> = heard
        .iter()
        .filter_map(|m| match m {
            ServerMessage::PlayerStateUpdated(v) => Some(v.player_id.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(states, [pid("a"), pid("b")]);
    let a_state = h.player("a").abilities.clone();
    let expected_a = [
        ServerMessage::AbilityTagsChanged { player_id: pid("a"), tags: a_state.tags() },
        ServerMessage::HealthChanged { player_id: pid("a"), health: 0 },
    ];
    for m in &expected_a {
        assert!(heard.contains(m), "{m:?} in {heard:?}");
    }
    let about_b = heard.iter().filter(|m| {
        matches!(m, ServerMessage::AbilityTagsChanged { player_id, .. }
            | ServerMessage::HealthChanged { player_id, .. } if *player_id == pid("b"))
    });
    assert_eq!(about_b.count(), 0, "b holds the defaults: no tags, full health");
    let pawns: Vec<(PawnId, bool)> = heard
        .iter()
        .filter_map(|m| match m {
            ServerMessage::PawnSpawned(v) => Some((v.pawn_id, v.alive)),
            _ => None,
        })
        .collect();
    assert_eq!(pawns.len(), 2);
    assert!(pawns.contains(&(dead, false)) && pawns.contains(&(alive, true)));
    let died: Vec<&ServerMessage> =
        heard.iter().filter(|m| matches!(m, ServerMessage::PawnDied { .. })).collect();
    assert_eq!(died, [&ServerMessage::PawnDied { pawn_id: dead }]);
}
