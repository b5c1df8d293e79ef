//! What the contract tests share: their worlds (from `gatehouse_tests::worlds`), and readable
//! predicates over messages and sessions.

use std::collections::BTreeMap;
use std::time::Duration;

use gatehouse_protocol::{ClientMessage, PlayerId, ServerMessage, TransitionId};
use gatehouse_server::game::Output;
use gatehouse_tests::carries;
use gatehouse_tests::sim::{ClientId, Conditions, Sim};
pub(crate) use gatehouse_tests::worlds::{HAZARDOUS, PLAIN};
use proptest::test_runner::Config as ProptestConfig;

pub(crate) fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

pub(crate) fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// Each direction of each connection of a property's run: up to 10 % of transmissions lost
/// (`loss`), each message at most twice, so every message arrives within
/// [`Conditions::max_delay`] (190 ms).
pub(crate) fn lossy(loss: f64) -> Conditions {
    Conditions { latency: ms(20), jitter: ms(20), loss, rto: ms(50), max_retransmissions: 2 }
}

/// A property's `cases` runs. No failure file: a case saved under one mutant would be replayed
/// first under every later one. A failure found here becomes a named scenario test.
pub(crate) fn property_config(cases: u32) -> ProptestConfig {
    ProptestConfig { cases, failure_persistence: None, ..ProptestConfig::default() }
}

/// A property's script of `events` (ms into the run, what happens), each as `action`, by when
/// it comes due (ties in the order given); and the next free ordinal, for actions the script
/// adds as it plays.
pub(crate) fn script<E: Clone, A>(
    events: &[(u64, E)],
    action: impl Fn(E) -> A,
) -> (BTreeMap<(Duration, u64), A>, u64) {
    let schedule =
        events.iter().enumerate().map(|(n, (at, e))| ((ms(*at), n as u64), action(e.clone())));
    (schedule.collect(), events.len() as u64)
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
