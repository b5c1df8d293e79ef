//! The registry-level rules of docs/spec/gates.md, one test (or more) each.

use gatehouse_lifecycle::{LifecycleError, WaitStatus};
use gatehouse_tags::catalog::*;

use crate::common::*;

/// docs/spec/gates.md G2: AND semantics.
#[test]
fn gate_opens_only_when_every_requirement_is_ready() {
    let (mut gates, mut log) = registry();
    let player = gates.scope(PLAYER_STATE, WORLD);
    let pawn = gates.scope(PAWN, WORLD);
    let requirements = [
        req(player, LIFECYCLE_FACT_PLAYER_STATE_TEAM_READY),
        req(player, LIFECYCLE_FACT_PLAYER_STATE_CHARACTER_DEF_READY),
        req(pawn, LIFECYCLE_FACT_CHARACTER_BEGIN_PLAY_READY),
    ];
    let status =
        gates.wait_for_all(pawn, "Character.Local", &requirements, &mut log, note("open")).unwrap();
    assert_eq!(status, WaitStatus::Pending);

    gates.set_ready(player, LIFECYCLE_FACT_PLAYER_STATE_TEAM_READY, true, &mut log).unwrap();
    gates.set_ready(pawn, LIFECYCLE_FACT_CHARACTER_BEGIN_PLAY_READY, true, &mut log).unwrap();
    assert!(log.is_empty(), "two of three facts must not open the gate");

    gates
        .set_ready(player, LIFECYCLE_FACT_PLAYER_STATE_CHARACTER_DEF_READY, true, &mut log)
        .unwrap();
    assert_eq!(log, ["open"], "the last fact opens the gate exactly once");
}

/// docs/spec/gates.md G1: object identity isolation.
#[test]
fn a_fact_on_another_object_does_not_satisfy_a_requirement() {
    let (mut gates, mut log) = registry();
    let pawn = gates.scope(PAWN, WORLD);
    let other = gates.scope(OTHER_PAWN, WORLD);
    gates
        .wait_for_all(
            pawn,
            "Feature.Initialize",
            &[req(pawn, LIFECYCLE_FACT_CHARACTER_BEGIN_PLAY_READY)],
            &mut log,
            note("pawn ready"),
        )
        .unwrap();

    gates.set_ready(other, LIFECYCLE_FACT_CHARACTER_BEGIN_PLAY_READY, true, &mut log).unwrap();
    assert!(log.is_empty(), "another pawn's fact must not open this pawn's gate");
    assert!(gates.is_ready_on(OTHER_PAWN, LIFECYCLE_FACT_CHARACTER_BEGIN_PLAY_READY));
    assert!(!gates.is_ready_on(PAWN, LIFECYCLE_FACT_CHARACTER_BEGIN_PLAY_READY));

    gates.set_ready(pawn, LIFECYCLE_FACT_CHARACTER_BEGIN_PLAY_READY, true, &mut log).unwrap();
    assert_eq!(log, ["pawn ready"]);
}

/// docs/spec/gates.md G3: cached ready-before-register delivery.
#[test]
fn cached_facts_are_delivered_during_registration() {
    let (mut gates, mut log) = registry();
    let player = gates.scope(PLAYER_STATE, WORLD);
    gates.set_ready(player, LIFECYCLE_FACT_UI_WIDGET_CONTROLLER_READY, true, &mut log).unwrap();

    let status = gates
        .wait_for_all(
            player,
            "Team.Presentation",
            &[req(player, LIFECYCLE_FACT_UI_WIDGET_CONTROLLER_READY)],
            &mut log,
            note("delivered"),
        )
        .unwrap();
    assert_eq!(status, WaitStatus::Delivered);
    assert_eq!(log, ["delivered"], "the callback ran before registration returned");
    assert_eq!(gates.pending_wait_count(), 0);
}

/// docs/spec/gates.md G2: one-shot delivery.
#[test]
fn a_delivered_wait_does_not_fire_again() {
    let (mut gates, mut log) = registry();
    let world = gates.scope(WORLD, WORLD);
    gates
        .wait_for_all(
            world,
            "World.Started",
            &[req(world, LIFECYCLE_FACT_WORLD_BEGIN_PLAY)],
            &mut log,
            note("once"),
        )
        .unwrap();
    gates.set_ready(world, LIFECYCLE_FACT_WORLD_BEGIN_PLAY, true, &mut log).unwrap();
    gates.clear(world, LIFECYCLE_FACT_WORLD_BEGIN_PLAY).unwrap();
    gates.set_ready(world, LIFECYCLE_FACT_WORLD_BEGIN_PLAY, true, &mut log).unwrap();

    assert_eq!(log, ["once"], "a reopened fact must not re-deliver a one-shot wait");
    assert_eq!(gates.blocking_facts(WORLD, "World.Started"), None);
    assert_eq!(gates.pending_wait_count(), 0);
}

/// docs/spec/gates.md G4: named-request replacement.
#[test]
fn registering_the_same_name_replaces_the_pending_request() {
    let (mut gates, mut log) = registry();
    let player = gates.scope(PLAYER_STATE, WORLD);
    let ready = [req(player, LIFECYCLE_FACT_UI_WIDGET_CONTROLLER_READY)];
    gates.wait_for_all(player, "Team.Presentation", &ready, &mut log, note("team 1")).unwrap();
    gates.wait_for_all(player, "Team.Presentation", &ready, &mut log, note("team 2")).unwrap();
    assert_eq!(gates.pending_wait_count(), 1);
    assert!(
        gates.is_pending(PLAYER_STATE, "Team.Presentation"),
        "the name now refers to the replacement"
    );

    gates.set_ready(player, LIFECYCLE_FACT_UI_WIDGET_CONTROLLER_READY, true, &mut log).unwrap();
    assert_eq!(log, ["team 2"], "only the replacement is delivered");
    assert_eq!(gates.counters().replaced, 1);
}

/// docs/spec/gates.md G4: different names are independent.
#[test]
fn different_request_names_are_independent() {
    let (mut gates, mut log) = registry();
    let player = gates.scope(PLAYER_STATE, WORLD);
    let ready = [req(player, LIFECYCLE_FACT_UI_WIDGET_CONTROLLER_READY)];
    gates.wait_for_all(player, "Feature.A", &ready, &mut log, note("a")).unwrap();
    gates.wait_for_all(player, "Feature.B", &ready, &mut log, note("b")).unwrap();
    assert!(gates.cancel(PLAYER_STATE, "Feature.A"));
    assert!(gates.is_pending(PLAYER_STATE, "Feature.B"));

    gates.set_ready(player, LIFECYCLE_FACT_UI_WIDGET_CONTROLLER_READY, true, &mut log).unwrap();
    assert_eq!(log, ["b"]);
}

/// docs/spec/gates.md G4: a completed name may be registered again.
#[test]
fn a_completed_request_name_may_register_again() {
    let (mut gates, mut log) = registry();
    let player = gates.scope(PLAYER_STATE, WORLD);
    let ready = [req(player, LIFECYCLE_FACT_UI_WIDGET_CONTROLLER_READY)];
    gates.set_ready(player, LIFECYCLE_FACT_UI_WIDGET_CONTROLLER_READY, true, &mut log).unwrap();
    for label in ["first", "second"] {
        let status =
            gates.wait_for_all(player, "Feature.Refresh", &ready, &mut log, note(label)).unwrap();
        assert_eq!(status, WaitStatus::Delivered);
    }
    assert_eq!(log, ["first", "second"]);
}

/// docs/spec/gates.md G5 and G7: reentrant reset.
#[test]
fn resetting_a_scope_from_a_callback_retires_waits_woken_by_the_same_publication() {
    let (mut gates, mut log) = registry();
    let world = gates.scope(WORLD, WORLD);
    let pawn = gates.scope(PAWN, WORLD);
    let begin = [req(world, LIFECYCLE_FACT_WORLD_BEGIN_PLAY)];
    gates
        .wait_for_all(world, "Pawn.Teardown", &begin, &mut log, |gates, log| {
            log.push("reset pawn");
            assert!(gates.reset_scope(PAWN));
        })
        .unwrap();
    gates.wait_for_all(pawn, "Pawn.Feature", &begin, &mut log, note("pawn feature")).unwrap();

    gates.set_ready(world, LIFECYCLE_FACT_WORLD_BEGIN_PLAY, true, &mut log).unwrap();
    assert_eq!(log, ["reset pawn"], "the pawn's wait was retired before its turn came");
    assert_eq!(gates.pending_wait_count(), 0);
    assert_eq!(gates.counters().retired, 1);
}

/// docs/spec/gates.md G6: stale-generation rejection.
#[test]
fn a_token_from_a_reset_scope_is_refused_by_set_ready() {
    let (mut gates, mut log) = registry();
    let old = gates.scope(PAWN, WORLD);
    gates.reset_scope(PAWN);
    let new = gates.scope(PAWN, WORLD);

    let error = gates
        .set_ready(old, LIFECYCLE_FACT_CHARACTER_BEGIN_PLAY_READY, true, &mut log)
        .unwrap_err();
    assert_eq!(
        error,
        LifecycleError::StalePublisher {
            token: old,
            fact: LIFECYCLE_FACT_CHARACTER_BEGIN_PLAY_READY,
            current: Some(new.generation()),
        }
    );
    assert!(!gates.is_ready_on(PAWN, LIFECYCLE_FACT_CHARACTER_BEGIN_PLAY_READY));
    assert_eq!(gates.counters().stale_rejections, 1);
}

/// docs/spec/gates.md G7: world lifetime cleanup.
#[test]
fn world_teardown_retires_every_scope_and_wait_of_that_world() {
    let (mut gates, mut log) = registry();
    let world = gates.scope(WORLD, WORLD);
    let pawn = gates.scope(PAWN, WORLD);
    let player = gates.scope(PLAYER_STATE, WORLD);
    let next_world = gates.scope(NEXT_WORLD, NEXT_WORLD);
    let login = gates.scope(LOGIN, GAME_INSTANCE);
    gates.set_ready(pawn, LIFECYCLE_FACT_CHARACTER_BEGIN_PLAY_READY, true, &mut log).unwrap();
    gates
        .wait_for_all(
            pawn,
            "Character.Local",
            &[req(player, LIFECYCLE_FACT_PLAYER_STATE_TEAM_READY)],
            &mut log,
            note("old world pawn"),
        )
        .unwrap();
    gates
        .wait_for_all(
            next_world,
            "World.Started",
            &[req(next_world, LIFECYCLE_FACT_WORLD_BEGIN_PLAY)],
            &mut log,
            note("next world"),
        )
        .unwrap();

    assert_eq!(gates.reset_lifetime(WORLD), 3);

    assert_eq!(gates.scope_count(), 2, "the next world and the login remain");
    assert!(gates.is_current(next_world) && gates.is_current(login));
    for token in [world, pawn, player] {
        assert!(!gates.is_current(token));
    }
    assert!(!gates.is_ready_on(PAWN, LIFECYCLE_FACT_CHARACTER_BEGIN_PLAY_READY));
    assert!(gates.is_pending(NEXT_WORLD, "World.Started"));
    assert!(!gates.is_pending(PAWN, "Character.Local"));
    assert!(
        gates.set_ready(player, LIFECYCLE_FACT_PLAYER_STATE_TEAM_READY, true, &mut log).is_err()
    );
    gates.set_ready(next_world, LIFECYCLE_FACT_WORLD_BEGIN_PLAY, true, &mut log).unwrap();
    assert_eq!(log, ["next world"], "no callback from the world travelled away from");
}

/// docs/spec/gates.md G7: login fact composition and lifetime differences.
#[test]
fn a_game_instance_login_fact_survives_world_teardown_and_composes_with_the_next_world() {
    let (mut gates, mut log) = registry();
    let login = gates.scope(LOGIN, GAME_INSTANCE);
    let world = gates.scope(WORLD, WORLD);
    let controller = gates.scope(CONTROLLER, WORLD);
    gates.set_ready(login, LIFECYCLE_FACT_NAKAMA_LOGIN_SUCCEEDED, true, &mut log).unwrap();
    gates.set_ready(controller, LIFECYCLE_FACT_GAME_MODE_POST_LOGIN, true, &mut log).unwrap();
    gates
        .wait_for_all(
            login,
            "Online.Start",
            &[
                req(login, LIFECYCLE_FACT_NAKAMA_LOGIN_SUCCEEDED),
                req(world, LIFECYCLE_FACT_WORLD_BEGIN_PLAY),
            ],
            &mut log,
            note("old world"),
        )
        .unwrap();

    gates.reset_lifetime(WORLD);

    assert!(gates.is_current(login), "travel must not retire the login scope");
    assert!(gates.is_ready_on(LOGIN, LIFECYCLE_FACT_NAKAMA_LOGIN_SUCCEEDED));
    assert!(
        !gates.is_ready_on(CONTROLLER, LIFECYCLE_FACT_GAME_MODE_POST_LOGIN),
        "the world-lifetime post-login fact goes with its world"
    );
    assert!(
        !gates.is_pending(LOGIN, "Online.Start"),
        "a wait referencing the old world is retired with it"
    );

    let next_world = gates.scope(NEXT_WORLD, NEXT_WORLD);
    gates
        .wait_for_all(
            login,
            "Online.Start",
            &[
                req(login, LIFECYCLE_FACT_NAKAMA_LOGIN_SUCCEEDED),
                req(next_world, LIFECYCLE_FACT_WORLD_BEGIN_PLAY),
            ],
            &mut log,
            note("next world"),
        )
        .unwrap();
    assert_eq!(
        gates.blocking_facts(LOGIN, "Online.Start"),
        Some(vec![req(next_world, LIFECYCLE_FACT_WORLD_BEGIN_PLAY)]),
        "the surviving login fact already counts"
    );
    gates.set_ready(next_world, LIFECYCLE_FACT_WORLD_BEGIN_PLAY, true, &mut log).unwrap();
    assert_eq!(log, ["next world"]);
}

/// docs/spec/gates.md G8: invalid listener cancellation.
#[test]
fn a_guarded_wait_is_cancelled_when_its_listener_goes() {
    let (mut gates, mut log) = registry();
    let subsystem = gates.scope(GAME_INSTANCE, GAME_INSTANCE);
    let pawn = gates.scope(PAWN, WORLD);
    let widget = gates.scope(WIDGET, WORLD);
    let gate = [req(pawn, LIFECYCLE_GATE_CHARACTER_REMOTE_READY)];
    gates
        .wait_for_all_guarded(subsystem, "Widget.Sub", widget, &gate, &mut log, note("widget"))
        .unwrap();
    gates.wait_for_all(subsystem, "Other.Sub", &gate, &mut log, note("unguarded")).unwrap();

    gates.reset_scope(WIDGET);
    assert!(!gates.is_pending(GAME_INSTANCE, "Widget.Sub"));

    gates.set_ready(pawn, LIFECYCLE_GATE_CHARACTER_REMOTE_READY, true, &mut log).unwrap();
    assert_eq!(log, ["unguarded"], "the gone listener's callback never runs");
}

/// docs/spec/gates.md G8: invalid listener cancellation, at registration.
#[test]
fn a_guarded_wait_whose_listener_is_already_gone_is_refused() {
    let (mut gates, mut log) = registry();
    let subsystem = gates.scope(GAME_INSTANCE, GAME_INSTANCE);
    let pawn = gates.scope(PAWN, WORLD);
    let widget = gates.scope(WIDGET, WORLD);
    gates.reset_scope(WIDGET);

    let error = gates
        .wait_for_all_guarded(
            subsystem,
            "Widget.Sub",
            widget,
            &[req(pawn, LIFECYCLE_GATE_CHARACTER_REMOTE_READY)],
            &mut log,
            note("widget"),
        )
        .unwrap_err();
    assert!(
        matches!(error, LifecycleError::StaleGuard { token, current: None, .. } if token == widget)
    );
    assert_eq!(gates.pending_wait_count(), 0);
}

/// A registry's debug output says what an operator looks for first: how many scopes and
/// pending waits it holds, whether it is draining, and its counters.
#[test]
fn debug_output_names_scopes_pending_waits_and_counters() {
    let (mut gates, mut log) = registry();
    let pawn = gates.scope(PAWN, WORLD);
    gates
        .wait_for_all(
            pawn,
            "Character.Local",
            &[req(pawn, LIFECYCLE_FACT_CHARACTER_BEGIN_PLAY_READY)],
            &mut log,
            note("open"),
        )
        .unwrap();
    let debug = format!("{gates:?}");
    for part in
        ["Registry", "scope_count: 1", "pending_wait_count: 1", "draining: false", "counters"]
    {
        assert!(debug.contains(part), "{part:?} missing from {debug}");
    }
}

/// The registry counts every callback it delivers, whether a wait opens at registration (its
/// facts already published) or later, when its last fact arrives.
#[test]
fn every_delivered_callback_is_counted() {
    let (mut gates, mut log) = registry();
    let pawn = gates.scope(PAWN, WORLD);
    let begin_play = [req(pawn, LIFECYCLE_FACT_CHARACTER_BEGIN_PLAY_READY)];
    gates.wait_for_all(pawn, "Character.First", &begin_play, &mut log, note("first")).unwrap();
    gates.wait_for_all(pawn, "Character.Second", &begin_play, &mut log, note("second")).unwrap();
    assert_eq!(gates.counters().delivered, 0);
    gates.set_ready(pawn, LIFECYCLE_FACT_CHARACTER_BEGIN_PLAY_READY, true, &mut log).unwrap();
    assert_eq!((gates.counters().delivered, log.len()), (2, 2));
    gates.wait_for_all(pawn, "Character.Third", &begin_play, &mut log, note("third")).unwrap();
    assert_eq!((gates.counters().delivered, log.len()), (3, 3));
}
