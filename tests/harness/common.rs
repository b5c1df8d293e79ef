//! What the contract tests share: their worlds (from `gatehouse_tests::worlds`), and readable
//! predicates over messages and sessions.

use std::time::Duration;

use gatehouse_protocol::{ClientMessage, PlayerId, ServerMessage, TransitionId};
use gatehouse_server::game::Output;
use gatehouse_tests::carries;
use gatehouse_tests::sim::{ClientId, Sim};
pub(crate) use gatehouse_tests::worlds::{HAZARDOUS, PLAIN};

pub(crate) fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

pub(crate) fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

pub(crate) fn is_ack(m: &ClientMessage) -> bool {
    matches!(m, ClientMessage::PossessionAcknowledged { .. })
}

pub(crate) fn is_ready_for(id: TransitionId) -> impl Fn(&ClientMessage) -> bool {
    move |m| matches!(m, ClientMessage::TransitionReady { transition_id } if *transition_id == id)
}

/// The client's `TransitionShown` for transition `id` (protocol version 5).
pub(crate) fn is_shown_for(id: TransitionId) -> impl Fn(&ClientMessage) -> bool {
    move |m| matches!(m, ClientMessage::TransitionShown { transition_id } if *transition_id == id)
}

pub(crate) fn is_end_of(id: TransitionId) -> impl Fn(&ServerMessage) -> bool {
    move |m| matches!(m, ServerMessage::EndTransition { transition_id } if *transition_id == id)
}

pub(crate) fn is_show_of(id: TransitionId) -> impl Fn(&ServerMessage) -> bool {
    move |m| matches!(m, ServerMessage::ShowTransition { transition_id, .. } if *transition_id == id)
}

pub(crate) fn is_end_output(id: TransitionId) -> impl Fn(&Output) -> bool {
    move |o| matches!(o, Output::Broadcast { message } if is_end_of(id)(message))
}

pub(crate) fn is_possessed(m: &ServerMessage) -> bool {
    matches!(m, ServerMessage::Possessed { .. })
}

/// A player-state update of `player` that carries its CharacterDef, alone or in a snapshot or
/// batch (docs/protocol.md 4.4, 4.5; held back, the whole snapshot or batch is).
pub(crate) fn is_character_def_of(player: PlayerId) -> impl Fn(&ServerMessage) -> bool {
    move |m| {
        carries(m, |m| {
            matches!(m, ServerMessage::PlayerStateUpdated(view)
                if view.player_id == player && view.character_def.is_some())
        })
    }
}

/// The id of the transition in flight on the server.
pub(crate) fn current_transition(sim: &Sim) -> TransitionId {
    sim.game().transition_id().expect("a transition in flight")
}

/// Every client placed: a pawn acknowledged and no loading screen, on the client; placed on
/// the server; no transition in flight.
pub(crate) fn all_placed(sim: &Sim) -> bool {
    sim.game().transition_id().is_none()
        && sim.game().snapshot().unplaced_players.is_empty()
        && sim.clients().filter(|&c| sim.is_open(c)).all(|c| sim.session(c).is_placed())
}

/// The invariants every client must end a clean run with: no error and every figure declared
/// must-be-0 in `gatehouse_client_sim::figures` at 0 (its session's and its gates').
pub(crate) fn assert_clean(sim: &Sim, client: ClientId) {
    let who = sim.player(client);
    let session = sim.session(client);
    // A live session's gate figures are its client's until the session finishes.
    let mut problems = session.stats().problems();
    problems.extend(session.client().gate_stats().problems());
    let samples = &session.client().gate_stats().violation_samples;
    assert!(problems.is_empty(), "{who}: {problems:?} (violations: {samples:?})");
}
