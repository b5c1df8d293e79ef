//! The phased transition seen from both sides (docs/spec/transitions.md T3, T5): a travel that
//! supersedes one in flight while clients stream, a late `EndTransition` of an older transition,
//! and a ready report arriving before or after the server waits for clients.

use std::collections::BTreeSet;
use std::time::Duration;

use gatehouse_client_sim::session::SessionConfig;
use gatehouse_protocol::{ClientMessage, NodeId, ServerMessage, TransitionId};
use gatehouse_tests::sim::{ClientId, ClientOptions, Event, Sim, SimConfig};

use crate::common::*;

/// When the fast client's ready report for the superseded transition reaches the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OldReady {
    /// Before the travel: kept for the old transition, then dropped with it.
    BeforeTravel,
    /// After the travel: a report for a superseded id, ignored.
    AfterTravel,
}

/// A client that streams every level in exactly `stream`.
fn streaming_in(sim: &Sim, stream: Duration) -> ClientOptions {
    let mut options = sim.client_options();
    options.session = SessionConfig { stream_time: (stream, stream), ..options.session };
    options
}

/// Boots with a fast and a slow streamer, and supersedes the boot transition with a travel to
/// the forest while the slow one streams and the server still streams the harbor.
fn supersede_while_streaming(order: OldReady) -> (Sim, ClientId, ClientId) {
    let mut sim = Sim::new(SimConfig::new(PLAIN, 21));
    let fast = streaming_in(&sim, ms(30));
    let ann = sim.connect_with("ann", fast);
    let slow = streaming_in(&sim, secs(2));
    let bob = sim.connect_with("bob", slow);
    let boot = TransitionId(1);
    let old_ready = match order {
        OldReady::BeforeTravel => None,
        OldReady::AfterTravel => Some(sim.hold_to_server(ann, is_ready_for(boot))),
    };
    sim.run_until("ann's ready report for the boot transition", secs(2), |s| match order {
        OldReady::BeforeTravel => s.arrived_at_server(ann, is_ready_for(boot)).is_some(),
        OldReady::AfterTravel => s.sent(ann).iter().any(|m| is_ready_for(boot)(m)),
    });
    assert_eq!(sim.game().snapshot().phase, "Loading", "the server still streams the harbor");
    assert!(sim.received_at(bob, is_show_of(boot)).is_some(), "bob streams the harbor");
    assert!(!sim.sent(bob).iter().any(|m| is_ready_for(boot)(m)), "bob has not reported");

    sim.travel("forest");
    assert_eq!(current_transition(&sim), TransitionId(2), "the travel supersedes the boot");
    if let Some(hold) = old_ready {
        assert_eq!(sim.release(hold), 1, "the old report leaves after the travel");
    }
    sim.run_until("both placed on the forest", secs(10), all_placed);
    (sim, ann, bob)
}

fn assert_ended_on_the_new_transition(sim: &Sim, ann: ClientId, bob: ClientId) {
    let counters = sim.game().counters();
    assert_eq!(counters.transitions_superseded, 1);
    assert_eq!(counters.transitions_completed, 1, "only the new transition ends");
    assert_eq!(counters.settle_timeouts, 0);
    for client in [ann, bob] {
        let stats = sim.session(client).stats();
        assert_eq!(stats.transitions_ended, BTreeSet::from([TransitionId(2)]));
        assert_eq!(stats.transitions_superseded, 1, "the screen stayed up across the travel");
        // Alone, in a batch or in a snapshot (docs/protocol.md 4.4, 4.5).
        let mut received = sim.received(client).into_iter().flat_map(gatehouse_tests::stood_for);
        let spawned = received.find_map(|m| match m {
            ServerMessage::PawnSpawned(view) if &view.owner == sim.player(client) => {
                Some(view.node)
            }
            _ => None,
        });
        assert_eq!(spawned, Some(NodeId::new("forest").unwrap()), "first pawn on the new node");
        assert_clean(sim, client);
    }
    // The slow client's streaming for the old transition was dropped: it only reported the new.
    let reports: Vec<_> = sim
        .sent(bob)
        .into_iter()
        .filter(|m| matches!(m, ClientMessage::TransitionReady { .. }))
        .collect();
    assert_eq!(reports, vec![&ClientMessage::TransitionReady { transition_id: TransitionId(2) }]);
}

/// docs/spec/transitions.md T5: a travel arriving mid-transition supersedes the in-flight one;
/// client tracking resets but the screen stays up. A ready report for the old transition that
/// arrived before the travel does not count for the new one.
#[test]
fn a_supersede_while_clients_stream_ends_them_on_the_new_transition() {
    let (sim, ann, bob) = supersede_while_streaming(OldReady::BeforeTravel);
    let travel = sim.event_at(|e| matches!(e, Event::Travel { .. })).unwrap();
    let old = sim.arrived_at_server(ann, is_ready_for(TransitionId(1))).unwrap();
    assert!(old <= travel, "the old report arrived first (in the step before the travel)");
    assert_ended_on_the_new_transition(&sim, ann, bob);
}

/// docs/spec/transitions.md T5, the same supersede in the other arrival order: the old transition's
/// ready report reaches the server after the travel, is recognised as stale and ignored
/// (docs/spec/sessions.md S12).
#[test]
fn a_ready_report_for_a_superseded_transition_is_ignored() {
    let (sim, ann, bob) = supersede_while_streaming(OldReady::AfterTravel);
    let travel = sim.event_at(|e| matches!(e, Event::Travel { .. })).unwrap();
    let old = sim.arrived_at_server(ann, is_ready_for(TransitionId(1))).unwrap();
    assert!(old > travel, "the old report arrived after the travel");
    let (before, _, _) = supersede_while_streaming(OldReady::BeforeTravel);
    // A `TransitionShown` for the boot transition that reached the server after the travel is
    // stale too (protocol version 5): the two runs time the travel differently, so leave those
    // out and compare the ready reports.
    let stale_reports = |s: &Sim| {
        let travel = s.event_at(|e| matches!(e, Event::Travel { .. })).unwrap();
        let late_shown = [ann, bob]
            .into_iter()
            .filter(|c| {
                s.arrived_at_server(*c, is_shown_for(TransitionId(1))).is_some_and(|at| at > travel)
            })
            .count() as u64;
        s.game().counters().stale_ignored - late_shown
    };
    assert_eq!(
        stale_reports(&sim),
        stale_reports(&before) + 1,
        "the late report is counted as stale, once"
    );
    assert_ended_on_the_new_transition(&sim, ann, bob);
}

/// docs/spec/transitions.md T5 (a newer transition keeps the screen up) with docs/spec/sessions.md
/// S12 (a late message is recognised by its id): an `EndTransition` of an older transition that
/// arrives after a newer one was shown is ignored; the client stays loading until the newer
/// transition ends.
#[test]
fn a_stale_end_transition_leaves_the_client_loading() {
    let mut sim = Sim::new(SimConfig::new(PLAIN, 31));
    let ann = sim.connect("ann");
    sim.run_until("ann placed after boot", secs(5), all_placed);

    sim.travel("forest");
    let forest = current_transition(&sim);
    let late_end = sim.hold_to_client(ann, is_end_of(forest));
    sim.run_until("the forest transition ended on the server", secs(5), |s| {
        s.game().transition_id().is_none()
    });
    assert_eq!(sim.held_count(late_end), 1, "its EndTransition is held back");

    sim.travel("harbor");
    let harbor = current_transition(&sim);
    sim.run_until("ann shown the harbor", secs(1), |s| {
        s.received_at(ann, is_show_of(harbor)).is_some()
    });
    sim.release(late_end);
    sim.run_until("the late EndTransition", secs(1), |s| {
        s.received_at(ann, is_end_of(forest)).is_some()
    });
    assert!(sim.session(ann).is_loading(), "a stale end never drops the newer screen");
    assert!(!sim.session(ann).is_placed());

    sim.run_until("ann placed on the harbor", secs(5), all_placed);
    let stale = sim.received_at(ann, is_end_of(forest)).unwrap();
    let end = sim.received_at(ann, is_end_of(harbor)).unwrap();
    assert!(stale < end);
    let stats = sim.session(ann).stats();
    assert_eq!(stats.transitions_ended, BTreeSet::from([TransitionId(1), harbor]));
    assert_eq!(stats.transitions_superseded, 1, "the harbor superseded the forest on screen");
    assert_clean(&sim, ann);
}

/// Runs the boot with one client streaming in `stream`; returns when its ready report reached
/// the server and when the server's own streaming finished (it waits for clients from then on).
fn ready_report_run(stream: Duration) -> (Duration, Duration) {
    let mut sim = Sim::new(SimConfig::new(PLAIN, 41));
    let options = streaming_in(&sim, stream);
    let ann = sim.connect_with("ann", options);
    sim.run_until("ann placed", secs(10), all_placed);
    let ready = sim.arrived_at_server(ann, is_ready_for(TransitionId(1))).unwrap();
    let streamed = sim.event_at(|e| matches!(e, Event::Streamed { .. })).unwrap();
    assert_eq!(sim.game().counters().transitions_completed, 1);
    assert_eq!(sim.game().counters().ready_timeouts, 0);
    assert_clean(&sim, ann);
    (ready, streamed)
}

/// docs/spec/transitions.md T3 (WaitingForClients: each client reports ready): a report that
/// arrives while the server is still streaming is kept for its transition and counts when the
/// server gets there.
#[test]
fn a_ready_report_before_the_server_waits_for_clients_is_kept() {
    let (ready, streamed) = ready_report_run(ms(10));
    assert!(ready < streamed, "the client was ready first");
}

/// docs/spec/transitions.md T3, the other arrival order: the server waits for clients, and the
/// report completes the transition when it arrives.
#[test]
fn a_ready_report_after_the_server_waits_for_clients_completes_it() {
    let (ready, streamed) = ready_report_run(ms(900));
    assert!(ready > streamed, "the server was ready first");
}
