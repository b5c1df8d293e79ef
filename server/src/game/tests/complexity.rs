//! Complexity pins (issue 12 item 3): one input's work on the game task does not grow with the
//! number of players. Each test runs the same scenario at two sizes and counts the player,
//! pawn and join records that walks over every one of them visited during the measured input:
//! a per-input step that scans all players shows up as a count that grows with them.

use std::time::Duration;

use gatehouse_protocol::ClientMessage;

use super::{Harness, WORLD, node, rules};
use crate::game::{GameRules, Input};

/// A booted harness on the core world with `players` placed (each joined between transitions).
fn with_players(players: usize) -> Harness {
    let rules = GameRules { max_players: players + 8, ..rules() };
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
fn costs(players: usize) -> [u64; 4] {
    let mut h = with_players(players);
    h.input(Input::Travel { node: node("forest") });
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
    [ready, login, join_ready, ack]
}

#[test]
fn one_inputs_walks_do_not_grow_with_the_players() {
    let (small, large) = (costs(20), costs(200));
    // A login sends the joiner every player state and pawn: one visit of each, the work the
    // joiner needs and nothing more (20 players and their pawns, then 200 and theirs).
    let beyond_snapshot = |visits: u64, players: u64| visits.saturating_sub(2 * players);
    // The count is live: the snapshot walk is in it (else every bound below holds at 0).
    assert!(small[1] >= 2 * 20 && large[1] >= 2 * 200, "login visits: {small:?}, {large:?}");
    assert!(
        beyond_snapshot(large[1], 200) <= beyond_snapshot(small[1], 20),
        "a login visited {} records at 20 players and {} at 200, beyond its snapshot",
        small[1],
        large[1]
    );
    for (what, i) in [("ready report", 0), ("join report", 2), ("acknowledgement", 3)] {
        let (s, l) = (small[i], large[i]);
        assert!(l <= s, "a {what} visited {s} records at 20 players and {l} at 200");
    }
}
