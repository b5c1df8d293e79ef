//! The rules of docs/spec/gates.md that live at the adapter and gate level (the registry-level ones
//! are `lifecycle/tests/registry/coverage.rs`).

use std::cell::Cell;
use std::rc::Rc;

use gatehouse_client_sim::adapters::REMOTE_GATE;
use gatehouse_client_sim::gates::GateError;
use gatehouse_client_sim::ids::{GAME_INSTANCE, LOCAL_PLAYER, LOGIN, listener_object, pawn_object};
use gatehouse_lifecycle::{Requirement, WaitStatus};
use gatehouse_protocol::PawnId;
use gatehouse_tags::GameplayTag;
use gatehouse_tags::catalog::*;

use crate::common::*;

/// docs/spec/gates.md G14: local-before-remote character ordering, in both arrival orders of the
/// local and the remote pawn.
#[test]
fn the_remote_gate_opens_only_after_the_local_dispatch_returned_in_both_arrival_orders() {
    // Remote pawn ready first: it waits for the local viewer.
    let mut sim = Sim::new();
    sim.welcome();
    sim.ready_player_state(ME, 1);
    sim.ready_player_state(BOB, 2);
    sim.after(UI_MS);
    sim.clear_events();
    sim.spawn(2, BOB);
    assert_eq!(sim.events(), [], "no remote gate before the local dispatch");
    assert!(!sim.client().is_character_init_gate_open(PawnId(2)));
    let blocking = sim.client().registry().blocking_facts(pawn_object(PawnId(2)), REMOTE_GATE);
    let facts: Vec<GameplayTag> = blocking.unwrap().iter().map(|r| r.fact).collect();
    assert_eq!(facts, [LIFECYCLE_FACT_CHARACTER_LOCAL_DISPATCH_RETURNED]);
    sim.spawn(1, ME);
    sim.subscribe_pawn("local", 1, LOCAL_READY);
    sim.subscribe_pawn("remote", 2, REMOTE_READY);
    sim.possess(1);
    assert_eq!(
        sim.events(),
        [Event::Local(1), Event::Fired("local", 1), Event::Remote(2), Event::Fired("remote", 2)],
        "local delegate, local subscribers, then the remote gate"
    );

    // Local pawn ready first: the remote one opens at its own last fact.
    let mut sim = Sim::new();
    sim.welcome();
    sim.ready_player_state(ME, 1);
    sim.ready_player_state(BOB, 2);
    sim.after(UI_MS);
    sim.clear_events();
    sim.spawn(1, ME);
    sim.possess(1);
    assert_eq!(sim.events(), [Event::Local(1)]);
    sim.spawn(2, BOB);
    assert_eq!(sim.events(), [Event::Local(1), Event::Remote(2)]);
    assert!(sim.client().is_character_init_gate_open(PawnId(1)));
    assert!(sim.client().is_character_init_gate_open(PawnId(2)));
}

/// docs/spec/gates.md G12: exact subject/tag filtering and multiple subscriptions.
#[test]
fn subscriptions_fire_only_for_their_subject_and_exact_gate() {
    let mut sim = Sim::new();
    sim.welcome();
    sim.ready_player_state(ME, 1);
    sim.ready_player_state(BOB, 2);
    sim.player_state(CAROL, None, Some("Vanguard"));
    sim.after(UI_MS);
    sim.clear_events();
    sim.spawn(2, BOB);
    sim.spawn(3, CAROL);
    let widget = listener_object(1);
    sim.client_mut().scope_listener(widget).unwrap();
    let bob = pawn_object(PawnId(2));
    sim.subscribe("bob by pawn", bob, bob, REMOTE_READY);
    sim.subscribe("bob by widget", widget, bob, REMOTE_READY);
    sim.subscribe_pawn("carol", 3, REMOTE_READY);
    sim.subscribe_pawn("bob local", 2, LOCAL_READY);
    for tag in
        ["Lifecycle.Gate.Character", "Lifecycle.Gate", "Lifecycle.Fact.Character.InitGateOpened"]
    {
        let tag = GameplayTag::parse(tag).unwrap();
        let refused = sim.client_mut().register_for_gate(bob, bob, tag, |_, _| {});
        assert_eq!(refused.unwrap_err(), GateError::NotAPublicGate(tag), "matching is exact");
    }

    sim.spawn(1, ME);
    sim.possess(1);
    assert_eq!(
        sim.events(),
        [
            Event::Local(1),
            Event::Remote(2),
            Event::Fired("bob by pawn", 2),
            Event::Fired("bob by widget", 2),
        ],
        "only bob's remote-gate subscriptions, both of them, in registration order"
    );
    sim.clear_events();
    sim.player_state(CAROL, Some(1), Some("Vanguard"));
    assert!(sim.events().contains(&Event::Fired("carol", 3)), "{:?}", sim.events());
    assert!(
        !sim.events().contains(&Event::Fired("bob local", 2)),
        "a remote pawn never opens its local gate"
    );
}

/// docs/spec/gates.md G8 and G12: invalid listener cancellation (a listener that is not valid is
/// refused; a listener that goes away prunes its subscription; a handle cancels).
#[test]
fn invalid_listeners_are_refused_and_departed_ones_are_pruned() {
    let mut sim = Sim::new();
    sim.welcome();
    sim.ready_player_state(ME, 1);
    sim.ready_player_state(BOB, 2);
    sim.spawn(2, BOB);
    let bob = pawn_object(PawnId(2));
    let (gone, kept, cancelled) = (listener_object(7), listener_object(8), listener_object(9));

    let refused = sim.client_mut().register_for_gate(gone, bob, REMOTE_READY, |_, _| {});
    assert_eq!(refused.unwrap_err(), GateError::ListenerGone(gone));
    let nobody = pawn_object(PawnId(99));
    let refused = sim.client_mut().register_for_gate(bob, nobody, REMOTE_READY, |_, _| {});
    assert_eq!(refused.unwrap_err(), GateError::SubjectGone(nobody));

    for listener in [gone, kept, cancelled] {
        sim.client_mut().scope_listener(listener).unwrap();
    }
    sim.subscribe("gone", gone, bob, REMOTE_READY);
    sim.subscribe("kept", kept, bob, REMOTE_READY);
    let handle = sim.subscribe("cancelled", cancelled, bob, REMOTE_READY);
    let pending = sim.client().registry().pending_wait_count();
    assert!(sim.client_mut().retire_listener(gone));
    assert_eq!(sim.client().registry().pending_wait_count(), pending - 1, "pruned at once");
    assert!(sim.client_mut().cancel_gate_subscription(&handle));
    assert!(!sim.client_mut().cancel_gate_subscription(&handle), "a handle cancels once");

    sim.after(UI_MS);
    sim.clear_events();
    sim.spawn(1, ME);
    sim.possess(1);
    assert_eq!(sim.events(), [Event::Local(1), Event::Remote(2), Event::Fired("kept", 2)]);
}

/// docs/spec/gates.md G16: team-presentation prerequisite arrival orders. Team before UI: the
/// presentation waits for the widget controller. UI before team: it follows the team at once.
/// Either way it carries the team cached when it is sent.
#[test]
fn the_team_presentation_waits_for_the_widget_controller_in_both_arrival_orders() {
    let mut sim = Sim::new();
    sim.welcome();
    // Team first.
    sim.player_state(BOB, Some(2), None);
    assert_eq!(sim.events(), [Event::TeamRaw(BOB.into(), Some(2))], "the cache updates at once");
    sim.after(UI_MS - 1);
    assert_eq!(sim.events().len(), 1, "no presentation before the widget controller");
    sim.after(1);
    assert_eq!(sim.events().last(), Some(&Event::Presented(BOB.into(), Some(2))));

    // UI first.
    sim.clear_events();
    sim.player_state(CAROL, None, None);
    sim.after(UI_MS);
    assert_eq!(sim.events(), [], "no team, nothing to present");
    sim.player_state(CAROL, Some(1), None);
    assert_eq!(
        sim.events(),
        [Event::TeamRaw(CAROL.into(), Some(1)), Event::Presented(CAROL.into(), Some(1))]
    );
}

/// docs/spec/gates.md G16, the presentation-only team change: repeated changes while waiting
/// replace the pending request, so the eventual broadcast uses the current cached team, once.
#[test]
fn repeated_team_changes_while_waiting_present_only_the_current_team() {
    let mut sim = Sim::new();
    sim.welcome();
    sim.player_state(BOB, Some(1), None);
    sim.player_state(BOB, Some(2), None);
    sim.player_state(BOB, Some(1), None);
    sim.player_state(BOB, Some(2), None);
    sim.after(UI_MS);
    let presented: Vec<Event> =
        sim.events().into_iter().filter(|e| matches!(e, Event::Presented(..))).collect();
    assert_eq!(presented, [Event::Presented(BOB.into(), Some(2))]);
    assert_eq!(sim.client().gate_stats().team_changes, 4);
}

/// docs/spec/gates.md G15: local widget/team gate reopening after UI reset; once per continuous
/// readiness period; a valid-to-valid team change is not a new period; team loss and player-state
/// replacement close it; a remote player state cannot satisfy it.
#[test]
fn the_local_widget_and_team_gate_reopens_after_a_ui_reset() {
    let mut sim = Sim::new();
    let periods = |sim: &Sim| sim.events().iter().filter(|e| **e == Event::WidgetTeam).count();
    sim.welcome();
    sim.ready_player_state(BOB, 2);
    sim.after(UI_MS);
    assert_eq!(periods(&sim), 0, "a remote player state cannot satisfy it");

    sim.player_state(ME, Some(1), None);
    assert!(!sim.client().is_local_player_widget_controller_and_team_ready());
    sim.after(UI_MS);
    assert_eq!(periods(&sim), 1, "no pawn, possession or CharacterDef required");
    assert!(sim.client().is_local_player_widget_controller_and_team_ready());
    let me = sim.client().player_state_object(&player(ME)).unwrap();
    let gate = LIFECYCLE_GATE_LOCAL_PLAYER_WIDGET_CONTROLLER_AND_TEAM_READY;
    assert!(sim.client().registry().is_ready_on(me, gate), "cached on the player state too");

    sim.player_state(ME, Some(2), None);
    assert_eq!(periods(&sim), 1, "a valid-to-valid team change is not a new period");
    assert!(sim.client().is_local_player_widget_controller_and_team_ready());

    let now = sim.now;
    sim.client_mut().reset_ui(now);
    assert!(!sim.client().is_local_player_widget_controller_and_team_ready(), "UI loss closes");
    sim.after(UI_MS);
    assert_eq!(periods(&sim), 2, "the UI rebuilt: a new period");

    sim.player_state(ME, Some(0), None);
    assert!(!sim.client().is_local_player_widget_controller_and_team_ready(), "team loss closes");
    sim.player_state(ME, Some(1), None);
    assert_eq!(periods(&sim), 3);

    sim.travel(1);
    assert!(!sim.client().is_local_player_widget_controller_and_team_ready(), "replaced");
    sim.after(STREAM_MS.max(UI_MS));
    assert_eq!(periods(&sim), 4, "the replacement player state opens its own period");
    assert_eq!(sim.client().gate_stats().gate_violations, 0);
}

/// docs/spec/gates.md G7 and G16: login fact composition and lifetime differences. The login fact
/// lives under the game instance and survives travel; the world's begin-play fact does not; a
/// composition of both waits again only for the new world.
#[test]
fn the_login_fact_survives_travel_and_the_world_facts_do_not() {
    let mut sim = Sim::new();
    sim.welcome();
    let old_world = sim.client().world_object().unwrap();
    let composed = Rc::new(Cell::new(0));
    let compose = |sim: &mut Sim, request: &'static str, extra: Option<GameplayTag>| {
        let world = sim.client().world_object().unwrap();
        let (registry, state) = sim.client_mut().registry_and_state();
        let login = registry.token(LOGIN).unwrap();
        let world = registry.token(world).unwrap();
        let mut requirements = vec![
            Requirement::new(login, LIFECYCLE_FACT_NAKAMA_LOGIN_SUCCEEDED),
            Requirement::new(world, LIFECYCLE_FACT_WORLD_BEGIN_PLAY),
        ];
        requirements.extend(extra.map(|fact| Requirement::new(world, fact)));
        let count = composed.clone();
        registry
            .wait_for_all(world, request, &requirements, state, move |_, _| {
                count.set(count.get() + 1)
            })
            .unwrap()
    };
    assert_eq!(compose(&mut sim, "Hud.Initialize", None), WaitStatus::Delivered);
    let gate = LIFECYCLE_GATE_LOCAL_PLAYER_WIDGET_CONTROLLER_AND_TEAM_READY;
    assert_eq!(compose(&mut sim, "Hud.Team", Some(gate)), WaitStatus::Pending);
    let login = sim.client().registry().token(LOGIN).unwrap();

    sim.travel(1);
    let registry = sim.client().registry();
    assert!(
        !registry.is_ready_on(old_world, LIFECYCLE_FACT_WORLD_BEGIN_PLAY),
        "world fact retired"
    );
    assert!(registry.is_ready_on(LOGIN, LIFECYCLE_FACT_NAKAMA_LOGIN_SUCCEEDED), "login survives");
    assert_eq!(registry.token(LOGIN), Some(login), "same login generation after travel");
    assert_eq!(registry.pending_wait_count(), 0, "the old world's pending composition retired");

    assert_eq!(compose(&mut sim, "Hud.Initialize", None), WaitStatus::Pending);
    sim.after(STREAM_MS);
    assert_eq!(composed.get(), 2, "the new world's begin-play completes it; login was cached");

    let now = sim.now;
    sim.client_mut().end_session(now);
    let registry = sim.client().registry();
    assert_eq!(registry.token(LOGIN), None, "the end of the login retires it");
    assert!(!registry.is_ready_on(LOGIN, LIFECYCLE_FACT_NAKAMA_LOGIN_SUCCEEDED));
    assert!(registry.token(GAME_INSTANCE).is_none(), "the game instance is a lifetime only");
}

/// docs/spec/gates.md G7 and G16: world lifetime cleanup. Travel retires every scope, wait,
/// subscription and listener of the old world; nothing from it runs afterwards; the router's
/// listener count stays flat however many worlds come and go.
#[test]
fn travel_retires_every_scope_wait_and_listener_of_the_old_world() {
    let mut sim = Sim::new();
    sim.ready_pair();
    sim.player_state(CAROL, None, Some("Vanguard"));
    sim.spawn(3, CAROL);
    sim.subscribe_pawn("old world", 3, REMOTE_READY);
    let widget = listener_object(1);
    sim.client_mut().scope_listener(widget).unwrap();
    sim.subscribe("old widget", widget, pawn_object(PawnId(3)), REMOTE_READY);
    let old: Vec<_> = [1, 2, 3].map(|p| sim.generation(p).unwrap()).into();
    let listeners = sim.client().router().listener_count();
    sim.clear_events();

    sim.travel(1);
    let registry = sim.client().registry();
    assert!(old.iter().all(|token| !registry.is_current(*token)), "old generations retired");
    assert_eq!(registry.token(widget), None, "a listener scoped in the world goes with it");
    assert_eq!(registry.pending_waits().filter(|w| old.contains(&w.owner)).count(), 0);
    assert!(!registry.is_ready_on(LOCAL_PLAYER, LIFECYCLE_FACT_CHARACTER_LOCAL_DISPATCH_RETURNED));
    assert_eq!(
        sim.client().router().listener_count(),
        listeners,
        "world listeners replaced, not added"
    );

    sim.player_state(CAROL, Some(1), Some("Vanguard"));
    sim.after(STREAM_MS.max(UI_MS));
    let events = sim.events();
    assert!(events.contains(&Event::Local(1)) && events.contains(&Event::Remote(3)), "{events:?}");
    assert!(
        !events.iter().any(|e| matches!(e, Event::Fired(..))),
        "nothing from the old world ran"
    );
    assert!(old.iter().all(|token| sim.generation(token_pawn(*token)) != Some(*token)));

    for id in 2..=6 {
        sim.travel(id);
        sim.after(STREAM_MS.max(UI_MS));
        assert_eq!(sim.client().router().listener_count(), listeners, "flat after travel {id}");
    }
    let stats = sim.client().gate_stats();
    assert_eq!(stats.router.world_lifetimes_retired, 6);
    assert_eq!(stats.gate_violations, 0, "{:?}", stats.violation_samples);
}

fn token_pawn(token: gatehouse_lifecycle::ScopeToken) -> u64 {
    gatehouse_client_sim::ids::pawn_of(token.object()).unwrap().0
}

/// The compatibility APIs: the cached queries and the native convenience wait follow the gates; the
/// delegates (router channels) announce without replaying.
#[test]
fn the_specialised_queries_and_waits_follow_the_gates() {
    let mut sim = Sim::new();
    sim.welcome();
    sim.ready_player_state(ME, 1);
    sim.spawn(1, ME);
    let hud = listener_object(3);
    sim.client_mut().scope_listener(hud).unwrap();
    let log = sim.log.clone();
    let waited =
        sim.client_mut().wait_for_character_init_gate_opened(hud, PawnId(1), fired(log, "init"));
    assert!(!waited.unwrap().was_delivered_at_registration());
    assert!(!sim.client().is_character_init_gate_open(PawnId(1)));
    assert!(!sim.client().is_local_player_widget_controller_and_team_ready());
    sim.after(UI_MS);
    sim.possess(1);
    assert!(sim.client().is_character_init_gate_open(PawnId(1)));
    assert!(sim.client().is_local_player_widget_controller_and_team_ready());
    assert_eq!(sim.gate_events(), [Event::WidgetTeam, Event::Local(1), Event::Fired("init", 1)]);
    let delivered_before = sim.client().router().stats().deliveries;
    sim.subscribe_pawn("late", 1, LOCAL_READY);
    assert_eq!(
        sim.client().router().stats().deliveries,
        delivered_before,
        "a late subscriber replays from the cached gate, not from the non-replaying delegate"
    );
}

/// A player who left is forgotten by the example game's own objects before anyone hears of it:
/// its cached team and its widget controller go with its player state.
#[test]
fn a_player_who_left_is_forgotten_by_the_team_cache_and_the_ui() {
    let mut sim = Sim::new();
    sim.ready_pair();
    let bob = player(BOB);
    let domain = sim.client().domain();
    assert!(domain.teams().team_of(&bob).is_some() && domain.ui().is_ready(&bob));
    sim.send(gatehouse_protocol::ServerMessage::PlayerLeft { player_id: bob.clone() });
    let domain = sim.client().domain();
    assert!(domain.player_states().get(&bob).is_none());
    assert_eq!(domain.teams().team_of(&bob), None);
    assert!(!domain.ui().is_ready(&bob));
}
