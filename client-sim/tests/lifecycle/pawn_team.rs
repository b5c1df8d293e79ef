//! Pawn team presentation: a pawn's team is presented to the local viewer once both the target and
//! the viewer have a valid team assignment, a ready widget controller and an opened character-init
//! gate on their current pawns; cached facts wake the request, live state remains the final
//! authority.

use gatehouse_client_sim::adapters::PAWN_PRESENTATION;
use gatehouse_client_sim::ids::pawn_object;
use gatehouse_lifecycle::ObjectId;
use gatehouse_protocol::PawnId;
use gatehouse_tags::GameplayTag;
use gatehouse_tags::catalog::*;

use crate::common::*;

/// The facts, and their objects, that block `pawn`'s pending presentation request.
fn blocking(sim: &Sim, pawn: u64) -> Vec<(GameplayTag, ObjectId)> {
    let registry = sim.client().registry();
    let blocking = registry.blocking_facts(pawn_object(PawnId(pawn)), PAWN_PRESENTATION);
    blocking.unwrap().iter().map(|r| (r.fact, r.token.object())).collect()
}

fn pending_requests(sim: &Sim, pawn: u64) -> usize {
    let owner = pawn_object(PawnId(pawn));
    let registry = sim.client().registry();
    registry
        .pending_waits()
        .filter(|w| w.owner.object() == owner && w.request.as_str() == PAWN_PRESENTATION)
        .count()
}

fn refused(sim: &Sim) -> u64 {
    sim.client().gate_stats().pawn_team_presentations_refused
}

fn violations(sim: &Sim) -> Vec<String> {
    sim.client().gate_stats().violation_samples.clone()
}

/// Pawn team presentation, in both arrival orders (as for every new fact or gate,
/// docs/spec/gates.md G13): the presentation follows whichever side becomes ready last, the viewer
/// or the target.
#[test]
fn the_pawn_team_presentation_waits_for_target_and_viewer_in_both_arrival_orders() {
    // The viewer first: its own pawn is presented to it, then bob's once bob is ready.
    let mut sim = Sim::new();
    sim.log_pawn_team();
    sim.welcome();
    sim.ready_player_state(ME, 1);
    sim.after(UI_MS);
    sim.spawn(1, ME);
    sim.possess(1);
    assert_eq!(sim.pawn_team_events(), [Event::PawnTeam(1, 1, 1, 1)]);
    sim.ready_player_state(BOB, 2);
    sim.spawn(2, BOB);
    let bob = sim.client().player_state_object(&player(BOB)).unwrap();
    assert_eq!(
        blocking(&sim, 2),
        [
            (LIFECYCLE_FACT_UI_WIDGET_CONTROLLER_READY, bob),
            (LIFECYCLE_FACT_CHARACTER_INIT_GATE_OPENED, pawn_object(PawnId(2))),
        ]
    );
    sim.after(UI_MS);
    assert_eq!(sim.pawn_team_events(), [Event::PawnTeam(1, 1, 1, 1), Event::PawnTeam(2, 2, 1, 1)]);

    // The target first: bob is ready and waits on the viewer's gate, which waits on my
    // CharacterDef; the CharacterDef releases both gates and both presentations.
    let mut sim = Sim::new();
    sim.log_pawn_team();
    sim.welcome();
    sim.ready_player_state(BOB, 2);
    sim.player_state(ME, Some(1), None);
    sim.after(UI_MS);
    sim.spawn(2, BOB);
    sim.spawn(1, ME);
    sim.possess(1);
    assert_eq!(sim.pawn_team_events(), []);
    assert_eq!(
        blocking(&sim, 2),
        [
            (LIFECYCLE_FACT_CHARACTER_INIT_GATE_OPENED, pawn_object(PawnId(2))),
            (LIFECYCLE_FACT_CHARACTER_INIT_GATE_OPENED, pawn_object(PawnId(1))),
        ],
        "one request spans the target's and the viewer's scopes"
    );
    sim.ready_player_state(ME, 1);
    assert_eq!(sim.pawn_team_events(), [Event::PawnTeam(1, 1, 1, 1), Event::PawnTeam(2, 2, 1, 1)]);
    assert_eq!((refused(&sim), violations(&sim)), (0, vec![]));
}

/// Pawn team presentation: a team change while the request waits replaces it (the target's or the
/// viewer's), so the one presentation made carries the teams cached now, and live state never has
/// to refuse a stale one.
#[test]
fn a_team_change_while_waiting_replaces_the_pawn_team_request() {
    let mut sim = Sim::new();
    sim.log_pawn_team();
    sim.welcome();
    sim.ready_player_state(ME, 1);
    sim.after(UI_MS);
    sim.spawn(1, ME);
    sim.possess(1);
    sim.ready_player_state(BOB, 2);
    sim.spawn(2, BOB);
    sim.ready_player_state(BOB, 3);
    sim.ready_player_state(BOB, 1);
    sim.ready_player_state(ME, 2);
    assert_eq!(pending_requests(&sim, 2), 1, "replaced, not added");
    sim.after(UI_MS);
    assert_eq!(
        sim.pawn_team_events(),
        [Event::PawnTeam(1, 1, 1, 1), Event::PawnTeam(1, 2, 1, 2), Event::PawnTeam(2, 1, 1, 2)],
        "bob's pawn presented once, with both current teams; mine again for my new team"
    );
    assert_eq!((refused(&sim), violations(&sim)), (0, vec![]));
}

/// Pawn team presentation: the callback revalidates the team cache. One message both completes
/// bob's remote gate (his CharacterDef) and changes his team: the request that the cached facts
/// woke carries the old team, so live state refuses it, and it is registered again for the current
/// team. The old team is never presented.
#[test]
fn live_state_refuses_a_presentation_woken_with_a_team_changed_in_the_same_step() {
    let mut sim = Sim::new();
    sim.log_pawn_team();
    sim.welcome();
    sim.ready_player_state(ME, 1);
    sim.player_state(BOB, Some(2), None);
    sim.after(UI_MS);
    sim.spawn(1, ME);
    sim.possess(1);
    sim.spawn(2, BOB);
    assert_eq!(
        blocking(&sim, 2),
        [(LIFECYCLE_FACT_CHARACTER_INIT_GATE_OPENED, pawn_object(PawnId(2)))]
    );
    sim.clear_events();

    sim.ready_player_state(BOB, 1);
    assert_eq!(
        sim.gate_events(),
        [Event::Remote(2), Event::PawnTeam(2, 1, 1, 1)],
        "presented in the same step, never with the old team 2"
    );
    assert_eq!(refused(&sim), 1, "the request woken with team 2 was refused");
    assert_eq!(violations(&sim), Vec::<String>::new());
}

/// Pawn team presentation with a relationship reset (docs/spec/gates.md G7): a presentation belongs
/// to the target's and the viewer's generations. Duplicate notifications and a UI rebuild present
/// nothing again; a new viewer generation presents every target again, a new target generation
/// presents itself.
#[test]
fn a_new_pawn_generation_needs_a_new_pawn_team_presentation() {
    let mut sim = Sim::new();
    sim.log_pawn_team();
    sim.ready_pair();
    assert_eq!(sim.pawn_team_events(), [Event::PawnTeam(1, 1, 1, 1), Event::PawnTeam(2, 2, 1, 1)]);
    sim.ready_player_state(BOB, 2);
    sim.spawn(2, BOB);
    sim.possess(1);
    let now = sim.now;
    sim.client_mut().reset_ui(now);
    sim.after(UI_MS);
    assert_eq!(sim.pawn_team_events().len(), 2, "no new relationship, no new presentation");
    let first_of_two = sim.presented.borrow()[1].clone();

    sim.clear_events();
    sim.unpossess(1);
    sim.spawn(4, ME);
    sim.possess(4);
    sim.destroy(1);
    assert_eq!(sim.pawn_team_events(), [Event::PawnTeam(2, 2, 4, 1), Event::PawnTeam(4, 1, 4, 1)]);
    let second_of_two = sim.presented.borrow()[2].clone();
    assert_eq!(second_of_two.token, first_of_two.token, "pawn 2's generation did not change");
    assert_ne!(second_of_two.viewer, first_of_two.viewer, "the viewer's did");

    sim.clear_events();
    sim.destroy(2);
    sim.spawn(5, BOB);
    assert_eq!(sim.pawn_team_events(), [Event::PawnTeam(5, 2, 4, 1)]);
    assert_eq!((refused(&sim), violations(&sim)), (0, vec![]));
}

/// Pawn team presentation with world lifetime cleanup (docs/spec/gates.md G7): travel retires a
/// waiting request with its world's scopes; nothing of the old world is ever presented, and the new
/// world presents its own generations.
#[test]
fn world_teardown_cancels_a_waiting_pawn_team_presentation() {
    let mut sim = Sim::new();
    sim.log_pawn_team();
    sim.ready_pair();
    sim.ready_player_state(CAROL, 1);
    sim.spawn(3, CAROL);
    assert_eq!(pending_requests(&sim, 3), 1, "carol's widget controller is still building");
    let old: Vec<_> = [1, 2, 3].map(|p| sim.generation(p).unwrap()).into();
    let presented_before = sim.presented.borrow().len();

    sim.travel(1);
    let registry = sim.client().registry();
    let old_requests = registry
        .pending_waits()
        .filter(|w| old.contains(&w.owner) && w.request.as_str() == PAWN_PRESENTATION)
        .count();
    assert_eq!(old_requests, 0, "retired with the old world");
    sim.after(STREAM_MS.max(UI_MS));
    let world = sim.client().domain().world().unwrap().id();
    let presented = sim.presented.borrow()[presented_before..].to_vec();
    let pawns: Vec<u64> = presented.iter().map(|n| n.pawn.0).collect();
    assert_eq!(pawns, [1, 2, 3], "the new world's generations, each once");
    for notice in &presented {
        assert_eq!(notice.world, world);
        assert!(!old.contains(&notice.token) && !old.contains(&notice.viewer), "{notice:?}");
    }
    assert_eq!(violations(&sim), Vec::<String>::new());
}

/// Pawn team presentation: the viewer is the pawn the local player controls, its possession
/// acknowledged. The local player's own pawn before its possession, or another player's pawn this
/// client possesses, is no viewer: no request names it, nothing is presented against it. Once the
/// own pawn is possessed, it presents.
#[test]
fn only_a_possessed_pawn_of_the_local_player_is_the_viewer() {
    let mut sim = Sim::new();
    sim.log_pawn_team();
    sim.welcome();
    sim.ready_player_state(ME, 1);
    sim.ready_player_state(BOB, 2);
    sim.after(UI_MS);
    sim.spawn(1, ME);
    sim.spawn(3, BOB);
    sim.possess(3);
    sim.after(UI_MS);
    assert_eq!(sim.pawn_team_events(), [], "no viewer yet");
    let pending = pending_requests(&sim, 1) + pending_requests(&sim, 3);
    assert_eq!(pending, 0, "no request names a pawn that is not the viewer");
    assert_eq!((refused(&sim), violations(&sim)), (0, vec![]));
    sim.possess(1);
    let presented = sim.pawn_team_events();
    assert!(presented.contains(&Event::PawnTeam(1, 1, 1, 1)), "{presented:?}");
    assert!(presented.iter().all(|e| matches!(e, Event::PawnTeam(_, _, 1, _))), "{presented:?}");
    assert_eq!(refused(&sim), 0);
}

/// Pawn team presentation: cached facts wake the request, live state decides. A request woken by
/// facts that live state contradicts (set ahead of the widget controller and the gate) is refused
/// once, and not registered again for the very same request: its facts are stale, and registering
/// it again would wake it again at once. The next relationship notification (here a UI rebuild)
/// registers it again, and it presents.
#[test]
fn a_request_refused_on_stale_facts_waits_for_the_next_notification() {
    // Registering the refused request again would wake and refuse it forever: bounded, so that
    // fails the test instead of hanging it.
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        refused_on_stale_facts();
        let _ = done.send(());
    });
    let outcome = finished.recv_timeout(std::time::Duration::from_secs(20));
    assert!(outcome.is_ok(), "the refusal looped, or an assertion failed: {outcome:?}");
}

fn refused_on_stale_facts() {
    let mut sim = Sim::with(false, Some(std::time::Duration::from_millis(400)));
    sim.log_pawn_team();
    sim.ready_pair();
    sim.ready_player_state(CAROL, 1);
    sim.spawn(3, CAROL);
    // Carol's widget controller is still building: her request waits for it and for her
    // pawn's gate. Both facts, ahead of live state.
    let carol = {
        let object = sim.client().player_state_object(&player(CAROL)).unwrap();
        sim.client().registry().token(object).unwrap()
    };
    let pawn = sim.generation(3).unwrap();
    let (registry, state) = sim.client_mut().registry_and_state();
    registry.set_ready(carol, LIFECYCLE_FACT_UI_WIDGET_CONTROLLER_READY, true, state).unwrap();
    registry.set_ready(pawn, LIFECYCLE_FACT_CHARACTER_INIT_GATE_OPENED, true, state).unwrap();
    // The next announcement pumps the woken request: live state refuses it, once.
    sim.health(BOB, 90);
    assert_eq!(refused(&sim), 1);
    assert_eq!(
        pending_requests(&sim, 3),
        0,
        "the very request just refused is not registered again"
    );
    assert!(!sim.pawn_team_events().iter().any(|e| matches!(e, Event::PawnTeam(3, ..))));
    // Carol's widget controller is ready; the UI rebuild at 400 ms registers the request again.
    sim.after(600);
    assert!(sim.client().gate_stats().ui_resets >= 1);
    let carols =
        sim.pawn_team_events().into_iter().filter(|e| matches!(e, Event::PawnTeam(3, ..))).count();
    assert_eq!(carols, 1, "{:?}", sim.pawn_team_events());
    assert_eq!(refused(&sim), 1);
}

/// Pawn team presentation: the target's gate must be open for its live role. A request woken by a
/// gate fact set ahead of a gate that cannot open (the pawn's class does not match its owner's
/// CharacterDef) is refused, and nothing is presented.
#[test]
fn a_request_woken_for_a_target_whose_gate_is_shut_is_refused() {
    let mut sim = Sim::new();
    sim.log_pawn_team();
    sim.ready_pair();
    sim.player_state(CAROL, Some(1), Some("Scout"));
    sim.after(UI_MS);
    sim.spawn(3, CAROL);
    assert!(!sim.client().is_character_init_gate_open(PawnId(3)), "a Scout in a Vanguard");
    assert_eq!(
        blocking(&sim, 3),
        [(LIFECYCLE_FACT_CHARACTER_INIT_GATE_OPENED, pawn_object(PawnId(3)))]
    );
    let pawn = sim.generation(3).unwrap();
    let (registry, state) = sim.client_mut().registry_and_state();
    registry.set_ready(pawn, LIFECYCLE_FACT_CHARACTER_INIT_GATE_OPENED, true, state).unwrap();
    sim.health(BOB, 90);
    assert_eq!(refused(&sim), 1);
    assert!(!sim.pawn_team_events().iter().any(|e| matches!(e, Event::PawnTeam(3, ..))));
}
