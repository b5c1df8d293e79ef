//! The runtime expectations every simulated client checks live (docs/spec/gates.md G7, G12, G14,
//! G15): one local event per local pawn generation, one remote event per remote pawn generation,
//! local before remote, no callback from a world after travel, and the widget/team gate once per
//! readiness period. A forged delegate broadcast on the client's router shows that each is caught;
//! a scripted run shows a clean client reports none.

use std::time::Duration;

use gatehouse_client_sim::adapters::{
    CHARACTER_SCOPED, GenerationScoped, PAWN_TEAM_PRESENTATION, PawnTeamPresented,
    REMOTE_CHARACTER_REP_NOTIFY, RemoteRepNotify, RepNotifyKind, Route,
};
use gatehouse_client_sim::gates::{
    CharacterGateOpened, LOCAL_CHARACTER_INIT_GATE_OPENED,
    LOCAL_PLAYER_WIDGET_CONTROLLER_AND_TEAM_READY, LocalPlayerReady,
    REMOTE_CHARACTER_INIT_GATE_OPENED,
};
use gatehouse_client_sim::ids::WorldId;
use gatehouse_protocol::PawnId;

use crate::common::*;

fn forge_character(
    sim: &mut Sim,
    local: bool,
    pawn: u64,
    world: WorldId,
    token: gatehouse_lifecycle::ScopeToken,
) {
    let channel =
        if local { LOCAL_CHARACTER_INIT_GATE_OPENED } else { REMOTE_CHARACTER_INIT_GATE_OPENED };
    let (router, core) = sim.client_mut().router_and_core();
    router
        .broadcast(core, channel, &CharacterGateOpened { pawn: PawnId(pawn), token, world })
        .unwrap();
}

fn world(sim: &Sim) -> WorldId {
    sim.client().domain().world().unwrap().id()
}

fn violations(sim: &Sim) -> u64 {
    sim.client().gate_stats().gate_violations
}

/// The scope token of `who`'s player state: a live scope to forge notices about.
fn token_of(sim: &Sim, who: &str) -> gatehouse_lifecycle::ScopeToken {
    let object = sim.client().player_state_object(&player(who)).unwrap();
    sim.client().registry().token(object).unwrap()
}

/// Forges the widget/team gate event of the local player, in the current world.
fn forge_local_player_ready(sim: &mut Sim) {
    let notice =
        LocalPlayerReady { player: player(ME), token: token_of(sim, ME), world: world(sim) };
    let (router, core) = sim.client_mut().router_and_core();
    router.broadcast(core, LOCAL_PLAYER_WIDGET_CONTROLLER_AND_TEAM_READY, &notice).unwrap();
}

/// Forges a pawn generation scoped as `token` in `world` (the adapters only ever scope one in
/// the current world).
fn forge_scoped(
    sim: &mut Sim,
    pawn: u64,
    token: gatehouse_lifecycle::ScopeToken,
    route: Route,
    world: WorldId,
) {
    let scoped = GenerationScoped { pawn: PawnId(pawn), token, route, world };
    let (router, core) = sim.client_mut().router_and_core();
    router.broadcast(core, CHARACTER_SCOPED, &scoped).unwrap();
}

/// The usual pair, then a travel streamed to its end: the world left and the world entered.
fn travelled_pair(sim: &mut Sim) -> (WorldId, WorldId) {
    sim.ready_pair();
    let old = world(sim);
    sim.travel(1);
    sim.after(STREAM_MS.max(UI_MS));
    let current = world(sim);
    assert_ne!(current, old);
    (old, current)
}

/// docs/spec/gates.md G12 and G14: one local gate event per local pawn generation.
#[test]
fn a_second_local_event_for_one_generation_is_a_violation() {
    let mut sim = Sim::new();
    sim.ready_pair();
    assert_eq!(violations(&sim), 0);
    let (token, world) = (sim.generation(1).unwrap(), world(&sim));
    forge_character(&mut sim, true, 1, world, token);
    assert_eq!(violations(&sim), 1);
    forge_character(&mut sim, false, 1, world, token);
    assert!(violations(&sim) >= 2, "and a local generation never opens the remote gate");
}

/// docs/spec/gates.md G14: local before remote.
#[test]
fn a_remote_event_before_the_local_dispatch_is_a_violation() {
    let mut sim = Sim::new();
    sim.welcome();
    sim.ready_player_state(BOB, 2);
    sim.after(UI_MS);
    sim.spawn(2, BOB);
    let (token, world) = (sim.generation(2).unwrap(), world(&sim));
    forge_character(&mut sim, false, 2, world, token);
    let stats = sim.client().gate_stats();
    assert_eq!(stats.gate_violations, 1);
    assert!(stats.violation_samples[0].contains("before the local viewer"), "{stats:?}");
}

/// docs/spec/gates.md G7: no callback from a world after travelling away.
#[test]
fn an_event_from_a_world_travelled_away_from_is_a_violation() {
    let mut sim = Sim::new();
    sim.ready_pair();
    let (old_token, old_world) = (sim.generation(1).unwrap(), world(&sim));
    sim.travel(1);
    sim.after(STREAM_MS.max(UI_MS));
    assert_eq!(violations(&sim), 0);
    forge_character(&mut sim, true, 1, old_world, old_token);
    assert_eq!(violations(&sim), 1);
}

/// docs/spec/gates.md G15: the widget/team gate once per readiness period.
#[test]
fn a_second_widget_team_event_in_one_period_is_a_violation() {
    let mut sim = Sim::new();
    sim.ready_pair();
    forge_local_player_ready(&mut sim);
    assert_eq!(violations(&sim), 1);
}

/// Pawn team presentation (runtime): a presentation for a stale generation, or with a team other
/// than the one cached, is a violation.
#[test]
fn a_pawn_team_presentation_for_a_stale_generation_or_a_mismatched_team_is_a_violation() {
    let mut sim = Sim::new();
    sim.log_pawn_team();
    sim.ready_pair();
    let presented = sim.presented.borrow()[1].clone();
    assert_eq!((presented.pawn, presented.team), (PawnId(2), gatehouse_protocol::TeamId(2)));
    assert_eq!(violations(&sim), 0);
    let forge = |sim: &mut Sim, notice: &PawnTeamPresented| {
        let (router, core) = sim.client_mut().router_and_core();
        router.broadcast(core, PAWN_TEAM_PRESENTATION, notice).unwrap();
    };

    let mismatched = PawnTeamPresented { team: gatehouse_protocol::TeamId(1), ..presented.clone() };
    forge(&mut sim, &mismatched);
    let stats = sim.client().gate_stats();
    assert_eq!(stats.gate_violations, 1);
    assert!(stats.violation_samples[0].contains("mismatched team"), "{stats:?}");

    sim.destroy(2);
    sim.spawn(5, BOB);
    forge(&mut sim, &presented);
    let stats = sim.client().gate_stats();
    let stale = stats.violation_samples[1..].iter().any(|v| v.contains("for a stale generation"));
    assert!(stale, "{:?}", stats.violation_samples);
}

/// docs/spec/gates.md G14, the remote character requirements (runtime): a RepNotify before its
/// remote gate opened, or replayed after a live one, is a violation.
#[test]
fn a_rep_notify_before_its_gate_or_replayed_after_a_live_one_is_a_violation() {
    let mut sim = Sim::new();
    sim.welcome();
    sim.ready_player_state(ME, 1);
    sim.ready_player_state(BOB, 2);
    sim.after(UI_MS);
    sim.spawn(2, BOB);
    let token = sim.generation(2).unwrap();
    let forge = |sim: &mut Sim, replayed: bool| {
        let kind = RepNotifyKind::Health;
        let notice = RemoteRepNotify { pawn: PawnId(2), token, kind, replayed };
        let (router, core) = sim.client_mut().router_and_core();
        router.broadcast(core, REMOTE_CHARACTER_REP_NOTIFY, &notice).unwrap();
    };
    forge(&mut sim, false);
    assert_eq!(violations(&sim), 1);
    assert!(sim.client().gate_stats().violation_samples[0].contains("before its remote gate"));

    sim.spawn(1, ME);
    sim.possess(1);
    sim.health(BOB, 50);
    assert_eq!(violations(&sim), 1, "the real ones are clean");
    forge(&mut sim, true);
    assert_eq!(violations(&sim), 2);
    assert!(sim.client().gate_stats().violation_samples[1].contains("replayed after a live one"));
}

/// A generation that ends before its facts all arrived (destroyed, world torn down, session ended)
/// is counted apart, never as a violation.
#[test]
fn generations_that_end_before_their_gate_are_counted_apart() {
    let mut sim = Sim::new();
    sim.ready_pair();
    sim.player_state(CAROL, None, Some("Vanguard"));
    sim.spawn(3, CAROL);
    sim.destroy(3);
    sim.spawn(5, CAROL);
    sim.travel(1);
    sim.spawn(6, CAROL);
    let stats = sim.session.finish(sim.now).gates;
    assert_eq!(stats.gate_violations, 0, "{:?}", stats.violation_samples);
    let ended = stats.remote_ended_before_gate;
    assert_eq!((ended.destroyed, ended.world_torn_down), (1, 1));
    assert_eq!(ended.session_ended, 3, "pawns 2, 5 and 6 of the unstarted world");
    assert_eq!(stats.accounted(), stats.pawn_generations, "every generation accounted for");
}

/// docs/spec/gates.md as a whole (runtime): a scripted run with joins, UI resets, a respawn, a
/// player leaving mid-gate and travels opens a gate for every pawn generation that lived long
/// enough, fires every public subscription once, presents every pawn's team, accounts for every
/// deferred RepNotify, and keeps the router's listener count flat.
#[test]
fn a_scripted_run_opens_a_gate_for_every_pawn_generation() {
    let mut sim = Sim::with(true, Some(Duration::from_millis(700)));
    sim.ready_pair();
    sim.ready_player_state(CAROL, 1);
    sim.spawn(3, CAROL);
    let listeners = sim.client().router().listener_count();
    sim.after(1000);
    // A respawn: unpossessed, replacement spawned and possessed, the dead pawn destroyed last.
    sim.unpossess(1);
    sim.after(200);
    sim.spawn(4, ME);
    sim.possess(4);
    sim.destroy(1);
    // Carol leaves while her new pawn waits for its widget controller.
    sim.player_state("dave", Some(2), Some("Scout"));
    sim.spawn_as(7, "dave", "Scout");
    sim.health("dave", 90);
    sim.health("dave", 80);
    sim.destroy(3);
    sim.send(gatehouse_protocol::ServerMessage::PlayerLeft { player_id: player(CAROL) });
    for id in 1..=3 {
        sim.travel(id);
        sim.after(150);
        sim.player_state(BOB, Some(if id % 2 == 0 { 1 } else { 2 }), Some("Vanguard"));
        sim.after(900);
        assert_eq!(sim.client().router().listener_count(), listeners, "travel {id}");
    }
    let stats = sim.session.finish(sim.now).gates;
    assert_eq!(stats.gate_violations, 0, "{:?}", stats.violation_samples);
    assert_eq!(stats.accounted(), stats.pawn_generations);
    assert!(stats.local_ready_opened >= 4 && stats.remote_ready_opened >= 8, "{stats:?}");
    assert_eq!(stats.subscriptions_fired, stats.local_ready_opened + stats.remote_ready_opened);
    assert!(
        stats.ui_resets >= 2 && stats.widget_controller_and_team_ready_opened >= 4,
        "{stats:?}"
    );
    assert_eq!(stats.router.mismatches + stats.router.refused, 0);
    assert_eq!(stats.router.world_lifetimes_retired, 3);
    assert!(stats.pawn_team_presentations >= stats.local_ready_opened, "{stats:?}");
    let settled = stats.rep_notifies_coalesced
        + stats.rep_notifies_replayed
        + stats.rep_notifies_discarded
        + stats.rep_notifies_deferred_at_end;
    assert!(stats.rep_notifies_deferred > 0, "{stats:?}");
    assert_eq!(stats.rep_notifies_deferred, settled, "every deferred RepNotify accounted for");
}

/// World begin-play after an arrival (docs/spec/sessions.md S7): a transition can end before this
/// client finished streaming (the server does not wait for a client that joined during its spawn
/// window). The screen drops, the destination world begins play, and its gates open; no generation
/// is left waiting in a world that never plays.
#[test]
fn a_transition_that_ends_before_streaming_finished_still_begins_play() {
    let mut sim = Sim::new();
    sim.welcome();
    sim.ready_player_state(ME, 1);
    sim.after(UI_MS);
    sim.spawn(1, ME);
    sim.possess(1);
    sim.travel(1);
    sim.send(gatehouse_protocol::ServerMessage::EndTransition {
        transition_id: gatehouse_protocol::TransitionId(1),
    });
    assert!(sim.client().domain().world().unwrap().is_playing(), "the screen dropped: it plays");
    sim.after(UI_MS);
    let locals = sim.gate_events().into_iter().filter(|e| *e == Event::Local(1)).count();
    assert_eq!(locals, 2, "one local gate per world");
    assert_eq!(sim.client().gate_stats().gate_violations, 0);
}

/// docs/spec/gates.md G9 (a remote pawn that appears stuck), at run level: a generation still
/// waiting after five seconds in a world that existed as long is reported stuck at the end, with
/// its pending wait listed; it is not a violation.
#[test]
fn a_generation_waiting_for_seconds_is_reported_stuck_at_the_end() {
    let mut sim = Sim::new();
    sim.ready_pair();
    sim.player_state(CAROL, None, Some("Vanguard"));
    sim.spawn(3, CAROL);
    sim.after(6000);
    let stats = sim.session.finish(sim.now).gates;
    assert_eq!(stats.stuck_at_end, 1);
    assert_eq!(stats.remote_ended_before_gate.session_ended, 1);
    assert_eq!(stats.gate_violations, 0);
    assert!(stats.pending_waits.iter().any(|w| w.contains("'Character.RemoteGate' of pawn 3")));
}

/// The live checks count every world the client creates: the first one, and one per travel.
#[test]
fn every_world_created_is_counted() {
    let mut sim = Sim::new();
    sim.ready_pair();
    assert_eq!(sim.client().gate_stats().worlds_created, 1);
    sim.travel(1);
    sim.after(STREAM_MS.max(UI_MS));
    assert_eq!(sim.client().gate_stats().worlds_created, 2);
}

/// docs/spec/gates.md G15 (runtime): the gate event needs both facts live; a widget controller
/// without a valid team is a violation.
#[test]
fn a_widget_team_event_without_a_team_is_a_violation() {
    let mut sim = Sim::new();
    sim.welcome();
    sim.player_state(ME, None, Some("Vanguard"));
    sim.after(UI_MS);
    assert_eq!(violations(&sim), 0);
    forge_local_player_ready(&mut sim);
    let stats = sim.client().gate_stats();
    assert_eq!(stats.gate_violations, 1, "{:?}", stats.violation_samples);
    assert!(stats.violation_samples[0].contains("team not ready"), "{stats:?}");
}

/// docs/spec/gates.md G7: no callback from a world after travelling away, also when the gate event
/// names the current world but its generation lives in a world travelled away from.
#[test]
fn a_gate_event_for_a_generation_of_an_old_world_is_a_violation_whatever_world_it_names() {
    let mut sim = Sim::new();
    let (old_world, current) = travelled_pair(&mut sim);
    let token = token_of(&sim, ME);
    forge_scoped(&mut sim, 9, token, Route::Remote, old_world);
    forge_character(&mut sim, false, 9, current, token);
    let stats = sim.client().gate_stats();
    let travelled = stats.violation_samples.iter().any(|v| v.contains("after travelling away"));
    assert!(travelled, "{:?}", stats.violation_samples);
}

/// docs/spec/gates.md G14: local before remote, where the local dispatch counts only if it returned
/// in the current world: a local gate that opened for a generation of an old world does not let a
/// remote gate open.
#[test]
fn a_local_dispatch_from_an_old_world_does_not_count_before_a_remote_gate() {
    let mut sim = Sim::new();
    let (old_world, current) = travelled_pair(&mut sim);
    let (local, remote) = (token_of(&sim, ME), token_of(&sim, BOB));
    // A local generation of the old world whose gate opens, and a remote one here.
    forge_scoped(&mut sim, 8, local, Route::Local, old_world);
    forge_character(&mut sim, true, 8, old_world, local);
    forge_scoped(&mut sim, 9, remote, Route::Remote, current);
    forge_character(&mut sim, false, 9, current, remote);
    let stats = sim.client().gate_stats();
    let early = stats.violation_samples.iter().any(|v| v.contains("before the local viewer"));
    assert!(early, "{:?}", stats.violation_samples);
}

/// The pawn team presentation of the first remote pawn after `ready_pair`, as a template to
/// forge from, with the forging helper.
fn presented_template(sim: &mut Sim) -> PawnTeamPresented {
    sim.log_pawn_team();
    sim.ready_pair();
    assert_eq!(violations(sim), 0);
    let presented = sim.presented.borrow()[1].clone();
    assert_eq!(presented.pawn, PawnId(2));
    presented
}

fn forge_presented(sim: &mut Sim, notice: &PawnTeamPresented) {
    let (router, core) = sim.client_mut().router_and_core();
    router.broadcast(core, PAWN_TEAM_PRESENTATION, notice).unwrap();
}

fn forge_rep_notify(sim: &mut Sim, pawn: u64, kind: RepNotifyKind, replayed: bool) {
    let token = sim.generation(pawn).unwrap();
    let notice = RemoteRepNotify { pawn: PawnId(pawn), token, kind, replayed };
    let (router, core) = sim.client_mut().router_and_core();
    router.broadcast(core, REMOTE_CHARACTER_REP_NOTIFY, &notice).unwrap();
}

fn samples_contain(sim: &Sim, text: &str) -> bool {
    sim.client().gate_stats().violation_samples.iter().any(|v| v.contains(text))
}

/// A generation that ends before its gate is counted under the reason it ended: a local generation
/// unpossessed while it waits for its widget controller, and another player's pawn whose remote
/// generation is rerouted when this client possesses it.
#[test]
fn a_generation_ended_before_its_gate_is_counted_under_its_reason() {
    let mut sim = Sim::new();
    sim.welcome();
    sim.ready_player_state(ME, 1);
    sim.spawn(1, ME);
    sim.possess(1);
    sim.unpossess(1);
    let stats = sim.client().gate_stats();
    assert_eq!(stats.local_ended_before_gate.unpossessed, 1, "{stats:?}");
    assert_eq!(stats.local_ended_before_gate.rerouted, 0, "{stats:?}");
    sim.spawn(3, BOB);
    sim.possess(3);
    let stats = sim.client().gate_stats();
    assert_eq!(stats.remote_ended_before_gate.rerouted, 1, "{stats:?}");
    assert_eq!(stats.remote_ended_before_gate.unpossessed, 0, "{stats:?}");
    assert_eq!(stats.gate_violations, 0, "{:?}", stats.violation_samples);
}

/// The live checks count what the nameplate consumer subscribed (one per pawn generation it
/// saw) and every presentation-only team change the team adapter sent.
#[test]
fn subscriptions_and_team_presentations_are_counted() {
    let mut sim = Sim::with_nameplates();
    sim.ready_pair();
    let stats = sim.client().gate_stats();
    assert_eq!(stats.subscriptions_registered, 2, "one per pawn generation: {stats:?}");
    let presented =
        sim.events().into_iter().filter(|e| matches!(e, Event::Presented(..))).count() as u64;
    assert!(presented >= 2, "{:?}", sim.events());
    assert_eq!(stats.team_presentations, presented);
}

/// docs/spec/gates.md G14 (runtime): Blueprint RepNotifies are for remote generations only; one for
/// a local generation is a violation.
#[test]
fn a_rep_notify_for_a_local_generation_is_a_violation() {
    let mut sim = Sim::new();
    sim.ready_pair();
    forge_rep_notify(&mut sim, 1, RepNotifyKind::Health, false);
    assert_eq!(violations(&sim), 1);
    assert!(samples_contain(&sim, "for a local generation"));
}

/// docs/spec/gates.md G14 (runtime): a deferred RepNotify is replayed at most once per kind
/// (coalesced); a second replay of one kind is a violation, while a replay of another kind is not.
#[test]
fn a_second_replay_of_one_rep_notify_kind_is_a_violation() {
    let mut sim = Sim::new();
    sim.ready_pair();
    forge_rep_notify(&mut sim, 2, RepNotifyKind::Movement, true);
    forge_rep_notify(&mut sim, 2, RepNotifyKind::Health, true);
    assert_eq!(violations(&sim), 0, "{:?}", sim.client().gate_stats().violation_samples);
    forge_rep_notify(&mut sim, 2, RepNotifyKind::Movement, true);
    assert_eq!(violations(&sim), 1);
    assert!(samples_contain(&sim, "replayed twice for one kind"));
}

/// docs/spec/gates.md G14 (runtime): replayed RepNotifies come before the RemoteReady subscribers;
/// one replayed after they ran is a violation.
#[test]
fn a_replay_after_the_remote_ready_subscribers_ran_is_a_violation() {
    let mut sim = Sim::with_nameplates();
    sim.ready_pair();
    assert_eq!(violations(&sim), 0);
    forge_rep_notify(&mut sim, 2, RepNotifyKind::Health, true);
    assert_eq!(violations(&sim), 1);
    assert!(samples_contain(&sim, "replayed after its RemoteReady subscribers ran"));
}

/// Pawn team presentation (runtime): the viewer is the local pawn's generation; a presentation
/// whose viewer is a remote generation, even one whose gate opened, is a violation.
#[test]
fn a_pawn_team_presentation_with_a_remote_viewer_is_a_violation() {
    let mut sim = Sim::new();
    let presented = presented_template(&mut sim);
    let remote_viewer = PawnTeamPresented { viewer: sim.generation(2).unwrap(), ..presented };
    forge_presented(&mut sim, &remote_viewer);
    assert!(samples_contain(&sim, "for a stale viewer generation"));
}

/// Pawn team presentation (runtime): a target's team is presented only once its gate opened; a
/// presentation for a generation still waiting (carol's pawn, her widget controller still building)
/// is a violation.
#[test]
fn a_pawn_team_presentation_before_the_targets_gate_opened_is_a_violation() {
    let mut sim = Sim::new();
    let presented = presented_template(&mut sim);
    sim.ready_player_state(CAROL, 2);
    sim.spawn(3, CAROL);
    assert!(!sim.client().is_character_init_gate_open(PawnId(3)));
    let waiting = sim.generation(3).unwrap();
    let notice =
        PawnTeamPresented { pawn: PawnId(3), player: player(CAROL), token: waiting, ..presented };
    forge_presented(&mut sim, &notice);
    assert!(
        samples_contain(&sim, "before the target's gate opened"),
        "{:?}",
        sim.client().gate_stats()
    );
}

/// docs/spec/gates.md G12 and G14: one remote event per remote pawn generation, seen by its public
/// subscribers too: a subscription that fires twice for one generation is a violation (here the
/// nameplate subscribed twice, after a forged second announcement).
#[test]
fn a_public_subscription_firing_twice_for_one_generation_is_a_violation() {
    let mut sim = Sim::with_nameplates();
    sim.welcome();
    sim.ready_player_state(ME, 1);
    sim.ready_player_state(BOB, 2);
    sim.after(UI_MS);
    sim.spawn(2, BOB);
    let token = sim.generation(2).unwrap();
    let here = world(&sim);
    forge_scoped(&mut sim, 2, token, Route::Remote, here);
    assert!(samples_contain(&sim, "scoped twice"));
    sim.spawn(1, ME);
    sim.possess(1);
    assert!(
        samples_contain(&sim, "twice for one generation"),
        "{:?}",
        sim.client().gate_stats().violation_samples
    );
}

/// docs/spec/gates.md G2 (one-shot AND-gates): a generation whose gate latched is never armed
/// again. After a UI reset drops a fact it required (and the adapter re-samples every character),
/// neither latched generation has a wait pending again: the gate stays latched, not re-registered.
#[test]
fn a_latched_generation_is_not_armed_again_when_a_fact_drops() {
    use gatehouse_client_sim::adapters::{LOCAL_GATE, REMOTE_GATE};
    use gatehouse_client_sim::ids::pawn_object;
    let mut sim = Sim::with(false, Some(Duration::from_millis(700)));
    sim.ready_pair();
    assert!(sim.client().is_character_init_gate_open(PawnId(1)));
    let pending = |sim: &Sim| {
        let registry = sim.client().registry();
        registry.is_pending(pawn_object(PawnId(1)), LOCAL_GATE)
            || registry.is_pending(pawn_object(PawnId(2)), REMOTE_GATE)
    };
    for _ in 0..100 {
        sim.after(10);
        assert!(!pending(&sim), "a latched gate re-armed at {:?}", sim.client().gate_stats());
    }
    assert!(sim.client().gate_stats().ui_resets >= 1, "the UI reset happened");
}

/// docs/spec/gates.md G7: a player state that leaves ends its scope, so nothing waits on it any
/// more and a new one would be a new generation.
#[test]
fn a_player_who_leaves_ends_its_player_state_scope() {
    let mut sim = Sim::new();
    sim.ready_pair();
    let bob = token_of(&sim, BOB);
    assert!(sim.client().registry().is_current(bob));
    sim.send(gatehouse_protocol::ServerMessage::PlayerLeft { player_id: player(BOB) });
    assert!(!sim.client().registry().is_current(bob));
}

/// The world adapter counts what a travel retired with the world: its lifetime, the listeners
/// it held and the scopes under it.
#[test]
fn a_travel_counts_the_world_listeners_and_scopes_it_retired() {
    let mut sim = Sim::new();
    travelled_pair(&mut sim);
    let router = &sim.client().gate_stats().router;
    assert_eq!(router.world_lifetimes_retired, 1);
    assert!(router.world_listeners_retired > 1, "{router:?}");
    assert!(router.world_scopes_retired > 1, "{router:?}");
}

/// The core's own accessors read the same registry and figures as the client's.
#[test]
fn the_client_core_exposes_its_registry_and_figures() {
    let mut sim = Sim::new();
    sim.ready_pair();
    let me = sim.client().player_state_object(&player(ME)).unwrap();
    let (token, opened) =
        (sim.client().registry().token(me), sim.client().gate_stats().local_ready_opened);
    let (_, core) = sim.client_mut().router_and_core();
    assert_eq!(core.registry().token(me), token);
    assert_eq!(core.state().stats().local_ready_opened, opened);
    assert_eq!(opened, 1);
}

/// Objects are named readably in pending-wait reports, by kind.
#[test]
fn objects_are_described_by_kind() {
    use gatehouse_client_sim::ids::{
        GAME_INSTANCE, LOCAL_PLAYER, LOGIN, listener_object, world_object,
    };
    let mut sim = Sim::new();
    sim.ready_pair();
    let (_, core) = sim.client_mut().router_and_core();
    let state = core.state();
    assert_eq!(state.describe(world_object(WorldId(3))), "world#3");
    assert_eq!(state.describe(LOGIN), "login");
    assert_eq!(state.describe(GAME_INSTANCE), "game instance");
    assert_eq!(state.describe(LOCAL_PLAYER), "local player");
    assert_eq!(state.describe(listener_object(7)), "listener #7");
    assert_eq!(state.describe(gatehouse_client_sim::ids::pawn_object(PawnId(2))), "pawn 2");
}

/// Sets every fact `pawn`'s pending gate `request` is blocked on, ahead of live state: the
/// registry wakes the gate, and the adapter's revalidation must catch what live state says.
fn force_gate(sim: &mut Sim, pawn: u64, request: &str) {
    let object = gatehouse_client_sim::ids::pawn_object(PawnId(pawn));
    let blocking = sim.client().registry().blocking_facts(object, request).unwrap();
    assert!(!blocking.is_empty());
    let (registry, state) = sim.client_mut().registry_and_state();
    for requirement in blocking {
        registry.set_ready(requirement.token, requirement.fact, true, state).unwrap();
    }
    // The woken gate's dispatch runs with the next announcement.
    sim.health(ME, 99);
}

/// docs/spec/gates.md G14: facts wake the gate, live state decides. A remote gate woken while the
/// pawn's class does not match its owner's CharacterDef does not open and is reported.
#[test]
fn a_remote_gate_woken_against_live_state_does_not_open() {
    use gatehouse_client_sim::adapters::REMOTE_GATE;
    let mut sim = Sim::new();
    sim.welcome();
    sim.ready_player_state(ME, 1);
    sim.player_state(BOB, Some(2), Some("Scout"));
    sim.after(UI_MS);
    sim.spawn(1, ME);
    sim.possess(1);
    sim.spawn(2, BOB);
    assert!(!sim.client().is_character_init_gate_open(PawnId(2)), "a Scout in a Vanguard");
    force_gate(&mut sim, 2, REMOTE_GATE);
    assert!(!sim.client().is_character_init_gate_open(PawnId(2)));
    assert!(samples_contain(&sim, "class mismatch"), "{:?}", sim.client().gate_stats());
}

/// World begin-play: a gate woken while its world is still streaming (not playing) does not open
/// and is reported as such.
#[test]
fn a_gate_woken_before_its_world_plays_does_not_open() {
    use gatehouse_client_sim::adapters::LOCAL_GATE;
    let mut sim = Sim::new();
    sim.ready_pair();
    sim.travel(1);
    assert!(!sim.client().domain().world().unwrap().is_playing());
    force_gate(&mut sim, 1, LOCAL_GATE);
    assert!(samples_contain(&sim, "is not the playing world"), "{:?}", sim.client().gate_stats());
    assert!(!sim.client().is_character_init_gate_open(PawnId(1)), "and it stays shut");
}

/// The local player's scopes the widget/team gate waits on: its player state and the world.
fn local_player_gate_scopes(
    sim: &Sim,
) -> (gatehouse_lifecycle::ScopeToken, gatehouse_lifecycle::ScopeToken) {
    let world = sim.client().registry().token(sim.client().world_object().unwrap()).unwrap();
    (token_of(sim, ME), world)
}

/// docs/spec/gates.md G15: facts wake the gate, live state decides. Woken by a team fact that live
/// state contradicts (no team), it does not dispatch and is reported.
#[test]
fn a_widget_team_gate_woken_against_live_state_is_reported() {
    use gatehouse_tags::catalog::LIFECYCLE_FACT_LOCAL_PLAYER_TEAM_READY;
    let mut sim = Sim::new();
    sim.welcome();
    sim.player_state(ME, None, Some("Vanguard"));
    sim.after(UI_MS);
    let (_, world) = local_player_gate_scopes(&sim);
    let (registry, state) = sim.client_mut().registry_and_state();
    registry.set_ready(world, LIFECYCLE_FACT_LOCAL_PLAYER_TEAM_READY, true, state).unwrap();
    sim.health(ME, 99);
    assert!(samples_contain(&sim, "woke while live state is not ready"));
    assert!(!sim.client().is_local_player_widget_controller_and_team_ready());
}

/// The same gate, woken and then closed again before its dispatch ran (its fact withdrawn and
/// the period re-evaluated in the same step): the dispatch is stale and does nothing.
#[test]
fn a_widget_team_gate_closed_before_its_dispatch_does_nothing() {
    use gatehouse_tags::catalog::LIFECYCLE_FACT_LOCAL_PLAYER_TEAM_READY;
    let mut sim = Sim::new();
    sim.welcome();
    sim.player_state(ME, None, Some("Vanguard"));
    sim.after(UI_MS);
    let (_, world) = local_player_gate_scopes(&sim);
    let (registry, state) = sim.client_mut().registry_and_state();
    registry.set_ready(world, LIFECYCLE_FACT_LOCAL_PLAYER_TEAM_READY, true, state).unwrap();
    registry.clear(world, LIFECYCLE_FACT_LOCAL_PLAYER_TEAM_READY).unwrap();
    // A player-state change re-evaluates the period (it closes), then the dispatch runs.
    sim.player_state(ME, None, Some("Scout"));
    let stats = sim.client().gate_stats();
    assert_eq!(stats.gate_violations, 0, "{:?}", stats.violation_samples);
    assert_eq!(stats.widget_controller_and_team_ready_opened, 0);
}

/// docs/spec/gates.md G16: the presentation-only team change waits for the widget controller, and
/// live state decides: woken by a widget fact set ahead of the widget controller, nothing is
/// presented.
#[test]
fn a_team_presentation_woken_before_the_widget_controller_presents_nothing() {
    use gatehouse_tags::catalog::LIFECYCLE_FACT_UI_WIDGET_CONTROLLER_READY;
    let mut sim = Sim::new();
    sim.ready_pair();
    sim.ready_player_state(CAROL, 1);
    let presented = sim.client().gate_stats().team_presentations;
    let carol = token_of(&sim, CAROL);
    let (registry, state) = sim.client_mut().registry_and_state();
    registry.set_ready(carol, LIFECYCLE_FACT_UI_WIDGET_CONTROLLER_READY, true, state).unwrap();
    sim.health(ME, 99);
    assert_eq!(sim.client().gate_stats().team_presentations, presented);
    let carols =
        sim.events().into_iter().filter(|e| matches!(e, Event::Presented(p, _) if p == CAROL));
    assert_eq!(carols.count(), 0);
}
