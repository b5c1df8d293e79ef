//! What every new fact or gate is tested for (docs/spec/gates.md G13), at the adapter and gate
//! level: ready-before-register, both arrival orders, duplicate source notifications, replacement
//! generations and world cleanup (the last is in `coverage`).

use gatehouse_client_sim::adapters::LOCAL_GATE;
use gatehouse_client_sim::ids::{LOCAL_PLAYER, pawn_object};
use gatehouse_lifecycle::LifecycleError;
use gatehouse_protocol::PawnId;
use gatehouse_tags::catalog::*;

use crate::common::*;

/// docs/spec/gates.md G3 and G12, ready-before-register: a subscription to a gate already cached
/// runs during registration (public subscriptions replay).
#[test]
fn a_subscription_to_an_open_gate_runs_during_registration() {
    let mut sim = Sim::new();
    sim.ready_pair();
    assert_eq!(sim.gate_events(), [Event::WidgetTeam, Event::Local(1), Event::Remote(2)]);
    let late = sim.subscribe_pawn("late", 2, REMOTE_READY);
    assert!(late.was_delivered_at_registration());
    assert_eq!(sim.events().last(), Some(&Event::Fired("late", 2)));
    let me = sim.client().player_state_object(&player(ME)).unwrap();
    let gate = LIFECYCLE_GATE_LOCAL_PLAYER_WIDGET_CONTROLLER_AND_TEAM_READY;
    let late = sim.subscribe("hud", me, me, gate);
    assert!(late.was_delivered_at_registration(), "the widget/team gate replays too");
}

/// docs/spec/gates.md G13: publish by sampling current state as well as events. A new world samples
/// every pawn and player state that already exists, so its gates open without any further server
/// message.
#[test]
fn a_new_world_opens_its_gates_from_sampled_state_alone() {
    let mut sim = Sim::new();
    sim.ready_pair();
    let first = [sim.generation(1), sim.generation(2)];
    sim.clear_events();
    sim.travel(1);
    assert_eq!(sim.gate_events(), [], "nothing plays before the new world begins play");
    sim.after(STREAM_MS.max(UI_MS));
    assert_eq!(sim.gate_events(), [Event::WidgetTeam, Event::Local(1), Event::Remote(2)]);
    assert_ne!([sim.generation(1), sim.generation(2)], first, "new generations in the new world");
}

/// docs/spec/gates.md G2 and G14, for every new fact or gate: both arrival orders. The local gate
/// opens whether the player state or the pawn arrives first, and waits for the CharacterDef the
/// save resolves.
#[test]
fn the_local_gate_opens_whether_the_player_state_or_the_pawn_arrives_first() {
    // Pawn first.
    let mut sim = Sim::new();
    sim.welcome();
    sim.spawn(1, ME);
    sim.possess(1);
    sim.after(UI_MS);
    assert_eq!(sim.gate_events(), [], "no player state yet");
    sim.ready_player_state(ME, 1);
    assert_eq!(sim.gate_events(), [], "its widget controller is still building");
    sim.after(UI_MS);
    assert_eq!(sim.gate_events(), [Event::Local(1), Event::WidgetTeam]);

    // Player state first, its CharacterDef only after the save loads.
    let mut sim = Sim::new();
    sim.welcome();
    sim.player_state(ME, Some(1), None);
    sim.after(UI_MS);
    sim.spawn(1, ME);
    sim.possess(1);
    assert_eq!(sim.gate_events(), [Event::WidgetTeam]);
    let blocking = sim.client().registry().blocking_facts(pawn_object(PawnId(1)), LOCAL_GATE);
    let facts: Vec<_> = blocking.unwrap().iter().map(|r| r.fact).collect();
    assert_eq!(facts, [LIFECYCLE_FACT_PLAYER_STATE_CHARACTER_DEF_READY]);
    sim.ready_player_state(ME, 1);
    assert_eq!(sim.gate_events(), [Event::WidgetTeam, Event::Local(1)]);
}

/// docs/spec/gates.md G2, for every new fact or gate: duplicate source notifications. Repeated
/// player-state updates, spawns, possessions and widget-controller readiness open each gate once,
/// in one generation.
#[test]
fn duplicate_source_notifications_open_each_gate_once() {
    let mut sim = Sim::new();
    sim.welcome();
    for _ in 0..2 {
        sim.ready_player_state(ME, 1);
        sim.ready_player_state(BOB, 2);
    }
    sim.after(UI_MS);
    sim.spawn(1, ME);
    let generation = sim.generation(1);
    for _ in 0..2 {
        sim.spawn(1, ME);
        sim.possess(1);
        sim.spawn(2, BOB);
        sim.ready_player_state(ME, 1);
    }
    assert_eq!(sim.generation(1), generation, "a duplicate is not a new relationship");
    assert_eq!(sim.gate_events(), [Event::WidgetTeam, Event::Local(1), Event::Remote(2)]);
    let stats = sim.client().gate_stats();
    assert_eq!((stats.local_ready_opened, stats.remote_ready_opened), (1, 1));
    assert_eq!(stats.gate_violations, 0);
}

/// docs/spec/gates.md G13 with docs/protocol.md 4.5, both forms of the same facts: a newcomer
/// greeted with a `WorldSnapshot` opens every remote pawn's gate exactly as the messages it
/// stands for, sent one by one in its order (player states, then pawns), would: once each, in
/// one generation.
#[test]
fn a_newcomers_snapshot_opens_the_remote_gates_as_its_messages_would() {
    let own_pawn = |sim: &mut Sim| {
        sim.ready_player_state(ME, 1);
        sim.after(UI_MS);
        sim.spawn(1, ME);
        sim.possess(1);
    };
    let mut one_by_one = Sim::new();
    one_by_one.welcome();
    one_by_one.ready_player_state(BOB, 2);
    one_by_one.ready_player_state(CAROL, 1);
    one_by_one.spawn(2, BOB);
    one_by_one.spawn(3, CAROL);
    own_pawn(&mut one_by_one);

    let mut sim = Sim::new();
    sim.welcome();
    sim.greet(&[(BOB, 2, &[2]), (CAROL, 1, &[3])]);
    own_pawn(&mut sim);
    assert_eq!(sim.gate_events(), one_by_one.gate_events());
    assert!(sim.gate_events().contains(&Event::Remote(2)), "{:?}", sim.gate_events());
    assert!(sim.gate_events().contains(&Event::Remote(3)));
    let stats = sim.client().gate_stats();
    assert_eq!((stats.local_ready_opened, stats.remote_ready_opened), (1, 2));
    assert_eq!(stats.gate_violations, 0);
}

/// docs/spec/gates.md G6 and G7, for every new fact or gate: replacement generations. Unpossession
/// retires the pawn scope and revokes the local viewer's dispatch-returned fact, so a remote pawn
/// arriving meanwhile waits; a re-possessed pawn and a replacement pawn each open in a new
/// generation; work holding the old token is refused.
#[test]
fn a_replacement_relationship_needs_and_gets_a_new_generation() {
    let mut sim = Sim::new();
    sim.ready_pair();
    let first = sim.generation(1).unwrap();
    sim.unpossess(1);
    assert_eq!(sim.generation(1), None, "unpossession retired the pawn scope");
    let registry = sim.client().registry();
    assert!(!registry.is_current(first));
    assert!(
        !registry.is_ready_on(LOCAL_PLAYER, LIFECYCLE_FACT_CHARACTER_LOCAL_DISPATCH_RETURNED),
        "the local viewer's dispatch-returned fact is revoked"
    );
    sim.ready_player_state(CAROL, 1);
    sim.after(UI_MS);
    sim.spawn(3, CAROL);
    sim.clear_events();

    sim.possess(1);
    let second = sim.generation(1).unwrap();
    assert_ne!(second, first, "re-possession is a new relationship");
    assert_eq!(
        sim.gate_events(),
        [Event::Local(1), Event::Remote(3)],
        "the waiting remote pawn follows"
    );

    sim.unpossess(1);
    sim.spawn(4, ME);
    sim.possess(4);
    sim.destroy(1);
    assert_eq!(sim.gate_events().last(), Some(&Event::Local(4)));
    assert_ne!(sim.generation(4).unwrap().generation(), second.generation());

    let (registry, state) = sim.client_mut().registry_and_state();
    let stale = registry.set_ready(first, LIFECYCLE_FACT_CHARACTER_BEGIN_PLAY_READY, true, state);
    assert!(matches!(stale, Err(LifecycleError::StalePublisher { .. })), "{stale:?}");
    assert_eq!(sim.client().gate_stats().gate_violations, 0);
}

/// docs/spec/gates.md G14: routing is exclusive. A pawn whose role changes (a simulated proxy this
/// client comes to possess) is retired and routed again in a new generation, so no generation ever
/// opens both character gates.
#[test]
fn a_pawn_whose_role_changes_is_routed_again_in_a_new_generation() {
    let mut sim = Sim::new();
    sim.ready_pair();
    let remote = sim.generation(2).unwrap();
    sim.unpossess(1);
    sim.possess(2);
    let local = sim.generation(2).unwrap();
    assert_ne!(local, remote, "a new generation for the new route");
    assert!(!sim.client().registry().is_current(remote));
    assert_eq!(sim.gate_events().last(), Some(&Event::Local(2)));
    let stats = sim.client().gate_stats();
    assert_eq!(stats.pawn_generations.remote, 1);
    assert_eq!(stats.pawn_generations.local, 2);
    assert_eq!(stats.gate_violations, 0, "{:?}", stats.violation_samples);
}
