//! docs/spec/gates.md G14, the remote character requirements: on remote release, the adapter
//! broadcasts `OnRemoteCharacterInitGateOpened`, replays deferred Blueprint RepNotifies, and
//! publishes `Lifecycle.Gate.Character.RemoteReady`. Here a Blueprint RepNotify is the presentation
//! notice that replicated state about a remote pawn or its owner's player state changed.

use gatehouse_client_sim::adapters::RepNotifyKind::{self, *};
use gatehouse_protocol::PawnId;

use crate::common::*;

fn rep(pawn: u64, kind: RepNotifyKind, replayed: bool) -> Event {
    Event::Rep(pawn, kind, replayed)
}

/// Welcome, both player states with their widget controllers ready, bob's pawn 2 spawned: its
/// remote gate waits for the local viewer's dispatch.
fn remote_pawn_waiting() -> Sim {
    let mut sim = Sim::new();
    sim.log_rep_notifies();
    sim.welcome();
    sim.ready_player_state(ME, 1);
    sim.ready_player_state(BOB, 2);
    sim.after(UI_MS);
    sim.spawn(2, BOB);
    sim
}

/// docs/spec/gates.md G14: RepNotifies of a remote generation are deferred while its gate is closed
/// (its state already applied, the notice held), then replayed in arrival order after
/// `OnRemoteCharacterInitGateOpened` and before the RemoteReady subscribers run;
/// local-before-remote ordering still holds.
#[test]
fn rep_notifies_before_the_remote_gate_are_replayed_in_order_before_remote_ready() {
    let mut sim = remote_pawn_waiting();
    sim.teleport(2, "marsh");
    sim.health(BOB, 80);
    sim.ability_tags(BOB);
    sim.health(BOB, 60);
    assert_eq!(sim.rep_events(), [], "deferred while the remote gate is closed");
    let domain = sim.client().domain();
    assert_eq!(domain.player_states().get(&player(BOB)).unwrap().health(), Some(60));
    assert_eq!(domain.characters().get(PawnId(2)).unwrap().node().as_str(), "marsh");
    let stats = sim.client().gate_stats();
    assert_eq!((stats.rep_notifies_deferred, stats.rep_notifies_coalesced), (4, 1));

    sim.spawn(1, ME);
    sim.subscribe_pawn("local", 1, LOCAL_READY);
    sim.subscribe_pawn("remote", 2, REMOTE_READY);
    sim.clear_events();
    sim.possess(1);
    assert_eq!(
        sim.events(),
        [
            Event::Local(1),
            Event::Fired("local", 1),
            Event::Remote(2),
            rep(2, Movement, true),
            rep(2, AbilityTags, true),
            rep(2, Health, true),
            Event::Fired("remote", 2),
        ],
        "local first; then the remote delegate, the replay in arrival order (Health coalesced to \
         its latest arrival), and only then the RemoteReady subscribers"
    );
    let stats = sim.client().gate_stats();
    assert_eq!(stats.rep_notifies_replayed, 3);
    assert_eq!(stats.gate_violations, 0, "{:?}", stats.violation_samples);
}

/// docs/spec/gates.md G14: once the remote gate released, a RepNotify is sent as it arrives, never
/// deferred; a local pawn has none.
#[test]
fn rep_notifies_after_the_remote_gate_opened_are_sent_at_once() {
    let mut sim = remote_pawn_waiting();
    sim.spawn(1, ME);
    sim.possess(1);
    assert!(sim.events().ends_with(&[Event::Local(1), Event::Remote(2)]), "{:?}", sim.events());
    assert_eq!(sim.rep_events(), [], "nothing was deferred");
    sim.clear_events();
    sim.health(BOB, 40);
    assert_eq!(sim.events(), [rep(2, Health, false)], "sent in the step it arrived");
    sim.died(2);
    sim.teleport(1, "marsh");
    sim.health(ME, 10);
    assert_eq!(
        sim.events(),
        [rep(2, Health, false), rep(2, Death, false)],
        "none for the local pawn"
    );
    let stats = sim.client().gate_stats();
    assert_eq!((stats.rep_notifies_delivered, stats.rep_notifies_deferred), (2, 0));
    assert_eq!(stats.gate_violations, 0, "{:?}", stats.violation_samples);
}

/// docs/spec/gates.md G14 with a relationship reset (G7): a generation retired before its gate
/// opened (destroyed, or its world torn down) discards its deferred RepNotifies; no replacement
/// generation ever replays them.
#[test]
fn a_generation_retired_before_its_gate_discards_its_deferred_rep_notifies() {
    let mut sim = remote_pawn_waiting();
    sim.health(BOB, 80);
    sim.teleport(2, "marsh");
    sim.destroy(2);
    assert_eq!(sim.client().gate_stats().rep_notifies_discarded, 2, "discarded with pawn 2");
    sim.spawn(3, BOB);
    sim.health(BOB, 70);
    sim.travel(1);
    assert_eq!(sim.client().gate_stats().rep_notifies_discarded, 3, "discarded with the world");

    sim.spawn(1, ME);
    sim.possess(1);
    sim.after(STREAM_MS.max(UI_MS));
    assert!(sim.events().contains(&Event::Remote(3)), "{:?}", sim.events());
    assert_eq!(sim.rep_events(), [], "the new generation of pawn 3 replays nothing");
    let stats = sim.client().gate_stats();
    assert_eq!((stats.rep_notifies_replayed, stats.rep_notifies_delivered), (0, 0));
    assert_eq!(stats.gate_violations, 0, "{:?}", stats.violation_samples);
}

/// docs/spec/gates.md G14: a notice arriving in the very step that releases the gate (the owner's
/// CharacterDef completes the class match) is deferred and replayed, not lost.
#[test]
fn the_notice_that_completes_the_remote_gate_is_replayed_not_lost() {
    let mut sim = Sim::new();
    sim.log_rep_notifies();
    sim.welcome();
    sim.ready_player_state(ME, 1);
    sim.player_state(BOB, Some(2), None);
    sim.after(UI_MS);
    sim.spawn(1, ME);
    sim.possess(1);
    sim.spawn(2, BOB);
    sim.clear_events();
    sim.ready_player_state(BOB, 2);
    assert_eq!(sim.events(), [Event::Remote(2), rep(2, PlayerState, true)]);
}

/// docs/spec/gates.md G14, bounded: however long the gate waits and however many notices arrive, a
/// generation holds one per kind, and replays each kind once.
#[test]
fn a_flood_of_rep_notifies_before_the_gate_stays_one_per_kind() {
    let mut sim = remote_pawn_waiting();
    for health in 0..500 {
        sim.health(BOB, health);
        if health % 100 == 0 {
            // Each a change: the replica announces only what changed.
            sim.ability_tags_dead(BOB, health % 200 == 0);
        }
    }
    let stats = sim.client().gate_stats();
    assert_eq!((stats.rep_notifies_deferred, stats.rep_notifies_coalesced), (505, 503));
    sim.spawn(1, ME);
    sim.possess(1);
    assert_eq!(sim.rep_events(), [rep(2, AbilityTags, true), rep(2, Health, true)]);
}

/// Protocol 3, `PawnsTeleported`: one message moving several pawns is applied and announced per
/// pawn, in id order (its runs ascend, protocol 6), as if each had come alone: each remote pawn
/// gets its Movement RepNotify.
#[test]
fn a_batched_teleport_moves_and_announces_every_pawn_in_id_order() {
    let mut sim = Sim::new();
    sim.log_rep_notifies();
    sim.ready_pair();
    sim.ready_player_state(CAROL, 1);
    sim.after(UI_MS);
    sim.spawn(3, CAROL);
    sim.clear_events();
    let marsh = gatehouse_protocol::NodeId::new("marsh").unwrap();
    let pawn_ids = gatehouse_protocol::PawnIdRuns::from_ids([PawnId(3), PawnId(1), PawnId(2)]);
    sim.send(gatehouse_protocol::ServerMessage::PawnsTeleported { node: marsh, pawn_ids });
    let domain = sim.client().domain();
    for pawn in [1, 2, 3] {
        assert_eq!(domain.characters().get(PawnId(pawn)).unwrap().node().as_str(), "marsh");
    }
    assert_eq!(sim.rep_events(), [rep(2, Movement, false), rep(3, Movement, false)]);
}

/// docs/spec/gates.md G14: RepNotifies still deferred when the session ends (their remote gate
/// never opened) are counted apart, one per kind coalesced.
#[test]
fn rep_notifies_still_deferred_at_the_end_are_counted() {
    let mut sim = remote_pawn_waiting();
    sim.health(BOB, 80);
    sim.teleport(2, "marsh");
    sim.health(BOB, 70);
    let stats = sim.client().finish(sim.now);
    assert_eq!(stats.rep_notifies_deferred, 3);
    assert_eq!(stats.rep_notifies_deferred_at_end, 2, "health coalesced, movement: {stats:?}");
}
