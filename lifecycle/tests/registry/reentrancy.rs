//! docs/spec/gates.md G5: the callback is removed before it runs, so cancellation, reset,
//! publication and registration from inside it are safe, and nested updates are drained by the
//! outer pump after it returns.

use std::panic::{AssertUnwindSafe, catch_unwind};

use gatehouse_lifecycle::WaitStatus;
use gatehouse_tags::catalog::*;

use crate::common::*;

/// docs/spec/gates.md G5: reentrant cancellation of the running request.
#[test]
fn a_callback_cancelling_itself_finds_nothing_pending() {
    let (mut gates, mut log) = registry();
    let world = gates.scope(WORLD, WORLD);
    gates
        .wait_for_all(
            world,
            "World.Started",
            &[req(world, LIFECYCLE_FACT_WORLD_BEGIN_PLAY)],
            &mut log,
            |gates, log| {
                assert!(
                    !gates.cancel(WORLD, "World.Started"),
                    "the running wait was removed before its callback"
                );
                assert_eq!(gates.pending_wait_count(), 0);
                log.push("ran");
            },
        )
        .unwrap();
    gates.set_ready(world, LIFECYCLE_FACT_WORLD_BEGIN_PLAY, true, &mut log).unwrap();
    assert_eq!(log, ["ran"]);
    assert_eq!(gates.counters().cancelled, 0);
}

/// docs/spec/gates.md G5: reentrant cancellation of another request woken by the same publication.
#[test]
fn a_callback_cancelling_another_woken_wait_prevents_its_delivery() {
    let (mut gates, mut log) = registry();
    let world = gates.scope(WORLD, WORLD);
    let begin = [req(world, LIFECYCLE_FACT_WORLD_BEGIN_PLAY)];
    gates
        .wait_for_all(world, "First", &begin, &mut log, |gates, log| {
            log.push("first");
            assert!(gates.cancel(WORLD, "Second"));
        })
        .unwrap();
    gates.wait_for_all(world, "Second", &begin, &mut log, note("second")).unwrap();
    gates.set_ready(world, LIFECYCLE_FACT_WORLD_BEGIN_PLAY, true, &mut log).unwrap();
    assert_eq!(log, ["first"]);
    assert_eq!(gates.pending_wait_count(), 0);
}

/// docs/spec/gates.md G5: reentrant reset of the running wait's own owner.
#[test]
fn a_callback_may_reset_its_own_owner() {
    let (mut gates, mut log) = registry();
    let pawn = gates.scope(PAWN, WORLD);
    let ready = [req(pawn, LIFECYCLE_FACT_CHARACTER_INIT_GATE_OPENED)];
    gates
        .wait_for_all(pawn, "Unpossess", &ready, &mut log, |gates, log| {
            log.push("unpossess");
            assert!(gates.reset_scope(PAWN));
        })
        .unwrap();
    gates.wait_for_all(pawn, "Later", &ready, &mut log, note("later")).unwrap();
    gates.set_ready(pawn, LIFECYCLE_FACT_CHARACTER_INIT_GATE_OPENED, true, &mut log).unwrap();
    assert_eq!(log, ["unpossess"]);
    assert_eq!(gates.token(PAWN), None);
    assert_eq!(gates.pending_wait_count(), 0);
}

/// docs/spec/gates.md G5: nested publication is drained after the callback returns.
#[test]
fn a_publication_from_a_callback_is_delivered_after_the_callback_returns() {
    let (mut gates, mut log) = registry();
    let pawn = gates.scope(PAWN, WORLD);
    let local_player = gates.scope(LOCAL_PLAYER, WORLD);
    gates
        .wait_for_all(
            pawn,
            "Character.Local",
            &[req(pawn, LIFECYCLE_FACT_CHARACTER_BEGIN_PLAY_READY)],
            &mut log,
            move |gates, log| {
                log.push("local dispatch begins");
                gates
                    .set_ready(
                        local_player,
                        LIFECYCLE_FACT_CHARACTER_LOCAL_DISPATCH_RETURNED,
                        true,
                        log,
                    )
                    .unwrap();
                log.push("local dispatch returns");
            },
        )
        .unwrap();
    gates
        .wait_for_all(
            local_player,
            "Character.Remote",
            &[req(local_player, LIFECYCLE_FACT_CHARACTER_LOCAL_DISPATCH_RETURNED)],
            &mut log,
            note("remote released"),
        )
        .unwrap();

    gates.set_ready(pawn, LIFECYCLE_FACT_CHARACTER_BEGIN_PLAY_READY, true, &mut log).unwrap();
    assert_eq!(log, ["local dispatch begins", "local dispatch returns", "remote released"]);
}

/// docs/spec/gates.md G5 with G3 (ready-before-register): a registration with cached facts from
/// inside a callback is queued, then delivered after the callback returns.
#[test]
fn a_registration_with_cached_facts_from_a_callback_runs_after_the_callback_returns() {
    let (mut gates, mut log) = registry();
    let world = gates.scope(WORLD, WORLD);
    let begin = [req(world, LIFECYCLE_FACT_WORLD_BEGIN_PLAY)];
    gates
        .wait_for_all(world, "Outer", &begin, &mut log, move |gates, log| {
            log.push("outer begins");
            let status = gates.wait_for_all(world, "Inner", &begin, log, note("inner")).unwrap();
            assert_eq!(status, WaitStatus::Queued);
            assert!(gates.is_pending(WORLD, "Inner"));
            log.push("outer returns");
        })
        .unwrap();
    gates.set_ready(world, LIFECYCLE_FACT_WORLD_BEGIN_PLAY, true, &mut log).unwrap();
    assert_eq!(log, ["outer begins", "outer returns", "inner"]);
    assert_eq!(gates.pending_wait_count(), 0);
}

/// docs/spec/gates.md G5 and G4: a callback may register its own request name again (the running
/// wait is no longer pending, so the new one is not replaced or removed).
#[test]
fn a_callback_may_register_its_own_request_name_again() {
    let (mut gates, mut log) = registry();
    let player = gates.scope(PLAYER_STATE, WORLD);
    gates
        .wait_for_all(
            player,
            "Team.Watch",
            &[req(player, LIFECYCLE_FACT_TEAM_ASSIGNMENT_READY)],
            &mut log,
            move |gates, log| {
                log.push("assigned");
                gates
                    .wait_for_all(
                        player,
                        "Team.Watch",
                        &[req(player, LIFECYCLE_FACT_PLAYER_STATE_TEAM_READY)],
                        log,
                        note("processed"),
                    )
                    .unwrap();
            },
        )
        .unwrap();
    gates.set_ready(player, LIFECYCLE_FACT_TEAM_ASSIGNMENT_READY, true, &mut log).unwrap();
    assert!(gates.is_pending(PLAYER_STATE, "Team.Watch"), "re-armed");
    assert_eq!(gates.counters().replaced, 0);

    gates.set_ready(player, LIFECYCLE_FACT_PLAYER_STATE_TEAM_READY, true, &mut log).unwrap();
    assert_eq!(log, ["assigned", "processed"]);
}

/// docs/spec/gates.md G5: nested updates drain in the order they were caused, after the waits the
/// outer publication had already woken.
#[test]
fn nested_updates_drain_in_the_order_they_were_caused() {
    let (mut gates, mut log) = registry();
    let world = gates.scope(WORLD, WORLD);
    let player = gates.scope(PLAYER_STATE, WORLD);
    let begin = [req(world, LIFECYCLE_FACT_WORLD_BEGIN_PLAY)];
    gates
        .wait_for_all(world, "A", &begin, &mut log, move |gates, log| {
            log.push("a");
            gates.set_ready(player, LIFECYCLE_FACT_UI_WIDGET_CONTROLLER_READY, true, log).unwrap();
            gates.set_ready(player, LIFECYCLE_FACT_PLAYER_STATE_TEAM_READY, true, log).unwrap();
        })
        .unwrap();
    // Registered before the one it is woken after: delivery follows causation, not age.
    gates
        .wait_for_all(
            player,
            "C",
            &[req(player, LIFECYCLE_FACT_PLAYER_STATE_TEAM_READY)],
            &mut log,
            note("c"),
        )
        .unwrap();
    gates
        .wait_for_all(
            player,
            "B",
            &[req(player, LIFECYCLE_FACT_UI_WIDGET_CONTROLLER_READY)],
            &mut log,
            note("b"),
        )
        .unwrap();
    gates.wait_for_all(world, "D", &begin, &mut log, note("d")).unwrap();

    gates.set_ready(world, LIFECYCLE_FACT_WORLD_BEGIN_PLAY, true, &mut log).unwrap();
    assert_eq!(log, ["a", "d", "b", "c"]);
}

/// docs/spec/gates.md G5 and G10: a wait queued behind a callback is delivered only if its facts
/// still hold when its turn comes.
#[test]
fn a_fact_closed_by_a_callback_holds_back_a_wait_already_woken() {
    let (mut gates, mut log) = registry();
    let player = gates.scope(PLAYER_STATE, WORLD);
    let widget = [req(player, LIFECYCLE_FACT_UI_WIDGET_CONTROLLER_READY)];
    gates
        .wait_for_all(player, "Ui.Reset", &widget, &mut log, move |gates, log| {
            log.push("ui reset");
            gates.clear(player, LIFECYCLE_FACT_UI_WIDGET_CONTROLLER_READY).unwrap();
        })
        .unwrap();
    gates.wait_for_all(player, "Team.Presentation", &widget, &mut log, note("present")).unwrap();

    gates.set_ready(player, LIFECYCLE_FACT_UI_WIDGET_CONTROLLER_READY, true, &mut log).unwrap();
    assert_eq!(log, ["ui reset"], "delivered while its fact was closed");
    assert_eq!(gates.blocking_facts(PLAYER_STATE, "Team.Presentation"), Some(widget.to_vec()));

    gates.set_ready(player, LIFECYCLE_FACT_UI_WIDGET_CONTROLLER_READY, true, &mut log).unwrap();
    assert_eq!(log, ["ui reset", "present"]);
}

/// docs/spec/gates.md G5: delivery survives a panicking callback (the panic propagates to the
/// caller; the registry does not stay stuck mid-drain).
#[test]
fn a_panicking_callback_leaves_the_registry_delivering() {
    let (mut gates, mut log) = registry();
    let world = gates.scope(WORLD, WORLD);
    let begin = [req(world, LIFECYCLE_FACT_WORLD_BEGIN_PLAY)];
    gates.wait_for_all(world, "Panics", &begin, &mut log, |_, _| panic!("callback bug")).unwrap();
    gates.wait_for_all(world, "Queued", &begin, &mut log, note("queued")).unwrap();

    let outcome = catch_unwind(AssertUnwindSafe(|| {
        gates.set_ready(world, LIFECYCLE_FACT_WORLD_BEGIN_PLAY, true, &mut log)
    }));
    assert!(outcome.is_err(), "the panic reaches the caller");
    assert!(log.is_empty());

    let status = gates.wait_for_all(world, "After", &begin, &mut log, note("after")).unwrap();
    assert_eq!(status, WaitStatus::Delivered);
    assert_eq!(log, ["queued", "after"], "what was queued is delivered first");
}
