//! The debugging cases of docs/spec/gates.md that the registry can express (G3, G6, G9). The cases
//! about adapters (wrong-pawn multicasts, remote pawns stuck on missing viewer facts, team colours,
//! dedicated servers) belong to the client simulator.

use gatehouse_lifecycle::{LifecycleError, WaitStatus};
use gatehouse_tags::catalog::*;

use crate::common::*;

/// docs/spec/gates.md G9: callback never fires → `GetBlockingFacts` names what is missing.
#[test]
fn a_wait_that_never_fires_names_its_missing_facts() {
    let (mut gates, mut log) = registry();
    let player = gates.scope(PLAYER_STATE, WORLD);
    let pawn = gates.scope(PAWN, WORLD);
    let requirements = [
        req(player, LIFECYCLE_FACT_PLAYER_STATE_TEAM_READY),
        req(pawn, LIFECYCLE_FACT_CHARACTER_BEGIN_PLAY_READY),
        req(player, LIFECYCLE_FACT_UI_WIDGET_CONTROLLER_READY),
    ];
    gates.wait_for_all(pawn, "Character.Local", &requirements, &mut log, note("open")).unwrap();
    gates.set_ready(pawn, LIFECYCLE_FACT_CHARACTER_BEGIN_PLAY_READY, true, &mut log).unwrap();

    assert_eq!(
        gates.blocking_facts(PAWN, "Character.Local"),
        Some(vec![requirements[0], requirements[2]])
    );
    let listed: Vec<String> = gates.pending_waits().map(|w| w.to_string()).collect();
    assert_eq!(
        listed,
        [format!(
            "wait 'Character.Local' of {pawn} blocked on \
             Lifecycle.Fact.PlayerState.TeamReady on {player}, \
             Lifecycle.Fact.UI.WidgetControllerReady on {player}"
        )]
    );
    assert_eq!(gates.blocking_facts(PAWN, "Never.Registered"), None);
    assert!(log.is_empty());
}

/// docs/spec/gates.md G9: callback never fires because of a wrong subject; the blocking requirement
/// names the subject it waits on.
#[test]
fn a_wait_on_the_wrong_subject_shows_that_subject_in_its_blocking_facts() {
    let (mut gates, mut log) = registry();
    let pawn = gates.scope(PAWN, WORLD);
    let other = gates.scope(OTHER_PAWN, WORLD);
    gates
        .wait_for_all(
            pawn,
            "Feature.Initialize",
            &[req(other, LIFECYCLE_FACT_CHARACTER_INIT_GATE_OPENED)],
            &mut log,
            note("open"),
        )
        .unwrap();
    gates.set_ready(pawn, LIFECYCLE_FACT_CHARACTER_INIT_GATE_OPENED, true, &mut log).unwrap();

    let blocking = gates.blocking_facts(PAWN, "Feature.Initialize").unwrap();
    assert_eq!(blocking.len(), 1);
    assert_eq!(blocking[0].token.object(), OTHER_PAWN, "the subject is visible");
    assert!(log.is_empty());
}

/// docs/spec/gates.md G3: callback fired during registration because all facts were already cached;
/// caller state must be prepared before registering.
#[test]
fn a_callback_with_cached_facts_runs_before_the_registration_returns() {
    let (mut gates, mut log) = registry();
    let player = gates.scope(PLAYER_STATE, WORLD);
    gates.set_ready(player, LIFECYCLE_FACT_TEAM_ASSIGNMENT_READY, true, &mut log).unwrap();
    log.push("caller prepared");

    let status = gates
        .wait_for_all(
            player,
            "Team.Apply",
            &[req(player, LIFECYCLE_FACT_TEAM_ASSIGNMENT_READY)],
            &mut log,
            |_, log| {
                assert_eq!(log.last(), Some(&"caller prepared"));
                log.push("callback");
            },
        )
        .unwrap();
    log.push("after registration");

    assert_eq!(status, WaitStatus::Delivered, "the caller is told it already ran");
    assert_eq!(log, ["caller prepared", "callback", "after registration"]);
}

/// docs/spec/gates.md G2 and G4: callback fires twice only through two independent subscriptions or
/// an intentionally reopened readiness period.
#[test]
fn a_callback_fires_twice_only_through_two_subscriptions_or_a_reopened_period() {
    let (mut gates, mut log) = registry();
    let player = gates.scope(PLAYER_STATE, WORLD);
    let ready = [req(player, LIFECYCLE_FACT_UI_WIDGET_CONTROLLER_READY)];
    gates.wait_for_all(player, "Sub.1", &ready, &mut log, note("sub 1")).unwrap();
    gates.wait_for_all(player, "Sub.2", &ready, &mut log, note("sub 2")).unwrap();
    gates.set_ready(player, LIFECYCLE_FACT_UI_WIDGET_CONTROLLER_READY, true, &mut log).unwrap();
    assert_eq!(log, ["sub 1", "sub 2"], "two subscriptions, two deliveries");

    // A readiness period closes and reopens: nothing fires until someone registers again.
    gates.clear(player, LIFECYCLE_FACT_UI_WIDGET_CONTROLLER_READY).unwrap();
    gates.wait_for_all(player, "Sub.1", &ready, &mut log, note("period 2")).unwrap();
    gates.set_ready(player, LIFECYCLE_FACT_UI_WIDGET_CONTROLLER_READY, true, &mut log).unwrap();
    gates.set_ready(player, LIFECYCLE_FACT_UI_WIDGET_CONTROLLER_READY, true, &mut log).unwrap();
    assert_eq!(log, ["sub 1", "sub 2", "period 2"]);
}

/// docs/spec/gates.md G6: callback never fires after respawn because the consumer retained an old
/// generation; it must acquire the replacement's scope and register.
#[test]
fn a_consumer_holding_the_old_generation_is_refused_after_respawn() {
    let (mut gates, mut log) = registry();
    let player = gates.scope(PLAYER_STATE, WORLD);
    let old_pawn = gates.scope(PAWN, WORLD);
    gates
        .wait_for_all(
            player,
            "Hud.Bind",
            &[req(old_pawn, LIFECYCLE_GATE_CHARACTER_LOCAL_READY)],
            &mut log,
            note("old pawn"),
        )
        .unwrap();

    // Death: the pawn relationship is replaced.
    gates.reset_scope(PAWN);
    let new_pawn = gates.scope(PAWN, WORLD);
    assert!(!gates.is_pending(PLAYER_STATE, "Hud.Bind"), "the old wait is retired");

    let error = gates
        .wait_for_all(
            player,
            "Hud.Bind",
            &[req(old_pawn, LIFECYCLE_GATE_CHARACTER_LOCAL_READY)],
            &mut log,
            note("stale"),
        )
        .unwrap_err();
    assert_eq!(
        error,
        LifecycleError::StaleRequirement {
            request: "Hud.Bind".into(),
            fact: LIFECYCLE_GATE_CHARACTER_LOCAL_READY,
            token: old_pawn,
            current: Some(new_pawn.generation()),
        }
    );
    assert!(
        gates
            .wait_for_all(
                old_pawn,
                "Pawn.Feature",
                &[req(old_pawn, LIFECYCLE_GATE_CHARACTER_LOCAL_READY)],
                &mut log,
                note("stale owner"),
            )
            .is_err()
    );

    gates
        .wait_for_all(
            player,
            "Hud.Bind",
            &[req(new_pawn, LIFECYCLE_GATE_CHARACTER_LOCAL_READY)],
            &mut log,
            note("new pawn"),
        )
        .unwrap();
    gates.set_ready(new_pawn, LIFECYCLE_GATE_CHARACTER_LOCAL_READY, true, &mut log).unwrap();
    assert_eq!(log, ["new pawn"]);
}

/// docs/spec/gates.md G6: old async work opens a new pawn → capture the original token and let
/// `SetReady` reject it after reset.
#[test]
fn old_async_work_cannot_open_the_replacement_pawn() {
    let (mut gates, mut log) = registry();
    let started_with = gates.scope(PAWN, WORLD);
    let completion = move |gates: &mut gatehouse_lifecycle::Registry<Log>, log: &mut Log| {
        gates.set_ready(started_with, LIFECYCLE_FACT_CHARACTER_BEGIN_PLAY_READY, true, log)
    };

    // The relationship is replaced while the work is in flight.
    gates.reset_scope(PAWN);
    let replacement = gates.scope(PAWN, WORLD);
    gates
        .wait_for_all(
            replacement,
            "Character.Local",
            &[req(replacement, LIFECYCLE_FACT_CHARACTER_BEGIN_PLAY_READY)],
            &mut log,
            note("replacement opened"),
        )
        .unwrap();

    let result = completion(&mut gates, &mut log);
    assert!(matches!(result, Err(LifecycleError::StalePublisher { .. })));
    assert!(!gates.is_ready_on(PAWN, LIFECYCLE_FACT_CHARACTER_BEGIN_PLAY_READY));
    assert!(log.is_empty(), "the replacement's gate stays closed");
    assert!(gates.is_pending(PAWN, "Character.Local"));
}
