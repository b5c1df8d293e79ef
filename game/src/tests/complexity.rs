//! Complexity pins: one input's work on the game task does not grow with the number of players.
//! Each test runs the same scenario at two sizes and counts the player, pawn and join records that
//! walks over every one of them visited during the measured input: a per-input step that scans all
//! players shows up as a count that grows with them.

use std::time::Duration;

use gatehouse_protocol::ClientMessage;

use super::{Harness, WORLD, node, rules};
use crate::{GameRules, Input};

/// A booted harness on the core world with `players` placed (each joined between transitions).
fn with_players(players: usize) -> Harness {
    with_players_and_room(players, 8)
}

/// The same, with room for `room` more players.
fn with_players_and_room(players: usize, room: usize) -> Harness {
    let rules = GameRules { max_players: players + room, ..rules() };
    let mut h = Harness::with(WORLD, rules);
    let boot = h.transition();
    h.stream_node("harbor");
    assert!(h.ended(boot));
    for i in 0..players {
        h.placed(&format!("p{i:04}"));
    }
    h
}

/// Records visited by whole-roster and whole-join walks so far.
fn visits(h: &Harness) -> u64 {
    h.game.roster.visits() + h.game.joins.visits()
}

/// The visits `step` made.
fn measured(h: &mut Harness, step: impl FnOnce(&mut Harness)) -> u64 {
    let before = visits(h);
    step(h);
    visits(h) - before
}

/// What one input costs at `players`: a ready report that is not the last one (WaitingForClients
/// stays), a login between transitions (a join starts), that joiner's join report, and its
/// possession acknowledgement (it is placed and released).
fn costs(players: usize) -> [u64; 5] {
    let mut h = with_players(players);
    // A travel freezes every player: a walk over all of them, which shows the count is live.
    let travel = measured(&mut h, |h| h.input(Input::Travel { node: node("forest") }));
    h.stream_node("forest");
    let first = h.game.roster.connection_of(&super::pid("p0000")).expect("p0000 is logged in");
    let ready = measured(&mut h, |h| h.ready(first));
    // Everyone else reports; the transition ends once the teleports are done.
    for i in 1..players {
        let c = h.game.roster.connection_of(&super::pid(&format!("p{i:04}"))).expect("logged in");
        h.ready(c);
    }
    h.advance(Duration::from_millis(100));
    assert!(h.game.transition_id().is_none(), "the travel ended");
    let mut joiner = None;
    let login = measured(&mut h, |h| joiner = Some(h.login("late")));
    let joiner = joiner.expect("the joiner's connection");
    let join_ready = measured(&mut h, |h| h.join_ready(joiner));
    let pawn = h.possessed(joiner).expect("the joiner was given a pawn");
    let ack = measured(&mut h, |h| {
        h.send(joiner, ClientMessage::PossessionAcknowledged { pawn_id: pawn });
    });
    assert!(h.player("late").is_placed());
    [ready, login, join_ready, ack, travel]
}

#[test]
fn one_inputs_walks_do_not_grow_with_the_players() {
    let (small, large) = (costs(20), costs(200));
    assert!(small[4] >= 20 && large[4] >= 200, "the count is live: travel visits {small:?}");
    // A login walks nobody: the shell greets the newcomer with the world clients know
    // (docs/protocol.md 4.5), not the core.
    for (what, i) in [("ready report", 0), ("login", 1), ("join report", 2), ("acknowledgement", 3)]
    {
        let (s, l) = (small[i], large[i]);
        assert!(l <= s, "a {what} visited {s} records at 20 players and {l} at 200");
    }
}

/// What one input costs with `joins` joins in flight beside 20 placed players: another login
/// (one more join starts), a join report, and a possession acknowledgement that releases a
/// joiner.
fn costs_beside_joins(joins: usize) -> [u64; 3] {
    let mut h = with_players_and_room(20, joins + 8);
    let joiners: Vec<_> = (0..joins).map(|i| h.login(&format!("j{i:04}"))).collect();
    assert_eq!(h.game.joins.len(), joins, "every joiner is still streaming");
    let login = measured(&mut h, |h| {
        h.login("late");
    });
    let (first, second) = (joiners[0], joiners[1]);
    h.join_ready(second);
    let join_ready = measured(&mut h, |h| h.join_ready(first));
    let pawn = h.possessed(first).expect("the first joiner was given a pawn");
    let ack = measured(&mut h, |h| {
        h.send(first, ClientMessage::PossessionAcknowledged { pawn_id: pawn });
    });
    assert!(h.player("j0000").is_placed(), "the acknowledgement placed the joiner");
    assert!(!h.player("j0000").abilities.is_paused(), "its effects resumed on release");
    [login, join_ready, ack]
}

#[test]
fn one_inputs_walks_do_not_grow_with_the_joins_in_flight() {
    let (small, large) = (costs_beside_joins(20), costs_beside_joins(200));
    for (what, i) in [("login", 0), ("join report", 1), ("acknowledgement", 2)] {
        let (s, l) = (small[i], large[i]);
        assert!(l <= s, "a {what} visited {s} records beside 20 joins and {l} beside 200");
    }
}

/// A login during a transition pauses the newcomer's effects alone: the others' are paused
/// already, and are not visited again.
#[test]
fn a_login_during_a_transition_does_not_walk_every_player() {
    let cost = |players: usize| {
        let mut h = with_players(players);
        h.input(Input::Travel { node: node("forest") });
        let login = measured(&mut h, |h| {
            h.login("late");
        });
        assert!(h.player("late").abilities.is_paused(), "the newcomer is frozen with the rest");
        login
    };
    let (small, large) = (cost(20), cost(200));
    assert!(
        large <= small,
        "a login during a transition visited {small} records at 20 players and {large} at 200"
    );
}

/// A login while Freezing waits for a save: whether the travel may resolve is asked
/// of the saves it awaits, not of every player, after every input.
#[test]
fn a_login_while_the_travel_waits_for_a_save_does_not_walk_every_player() {
    let cost = |players: usize| {
        let mut h = with_players(players);
        h.auto_load = false;
        // Named to sort after every placed player: a walk that stops at the first save still
        // loading would visit them all first.
        h.login("zloading");
        h.input(Input::Travel { node: node("forest") });
        assert_eq!(h.game.snapshot().phase, "Freezing", "the save in flight holds the travel");
        let login = measured(&mut h, |h| {
            h.login("zzlate");
        });
        assert_eq!(h.game.snapshot().phase, "Freezing", "still waiting for that save");
        login
    };
    let (small, large) = (cost(20), cost(200));
    assert!(
        large <= small,
        "a login in Freezing visited {small} records at 20 players and {large} at 200"
    );
}
