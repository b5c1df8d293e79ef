//! Scopes, lifetimes, generations, readiness queries, refusals and introspection
//! (docs/spec/gates.md, G1 and G6 above all).

use gatehouse_lifecycle::{LifecycleError, ObjectId, WaitStatus};
use gatehouse_tags::catalog::*;

use crate::common::*;

/// docs/spec/gates.md G1: `Scope(Object, Lifetime)` returns the current token.
#[test]
fn rescoping_with_the_same_lifetime_keeps_the_generation_facts_and_waits() {
    let (mut gates, mut log) = registry();
    let first = gates.scope(PAWN, WORLD);
    gates.set_ready(first, LIFECYCLE_FACT_CHARACTER_BEGIN_PLAY_READY, true, &mut log).unwrap();
    gates
        .wait_for_all(
            first,
            "Character.Local",
            &[req(first, LIFECYCLE_FACT_CHARACTER_INIT_GATE_OPENED)],
            &mut log,
            note("open"),
        )
        .unwrap();

    let again = gates.scope(PAWN, WORLD);
    assert_eq!(again, first);
    assert!(gates.is_ready_on(PAWN, LIFECYCLE_FACT_CHARACTER_BEGIN_PLAY_READY));
    assert!(gates.is_pending(PAWN, "Character.Local"));
    assert_eq!(gates.scope_count(), 1);
}

/// docs/spec/gates.md G1: presenting an object with a different lifetime resets its old scope.
#[test]
fn rescoping_with_a_different_lifetime_resets_the_old_scope() {
    let (mut gates, mut log) = registry();
    let in_world = gates.scope(PAWN, WORLD);
    gates.set_ready(in_world, LIFECYCLE_FACT_CHARACTER_BEGIN_PLAY_READY, true, &mut log).unwrap();
    gates
        .wait_for_all(
            in_world,
            "Character.Local",
            &[req(in_world, LIFECYCLE_FACT_CHARACTER_INIT_GATE_OPENED)],
            &mut log,
            note("old"),
        )
        .unwrap();

    let in_next_world = gates.scope(PAWN, NEXT_WORLD);
    assert!(in_next_world.generation() > in_world.generation());
    assert!(!gates.is_current(in_world));
    assert!(!gates.is_ready_on(PAWN, LIFECYCLE_FACT_CHARACTER_BEGIN_PLAY_READY));
    assert!(!gates.is_pending(PAWN, "Character.Local"));
    assert_eq!(gates.counters().retired, 1);

    assert_eq!(gates.reset_lifetime(WORLD), 0, "it no longer belongs to the old world");
    assert_eq!(gates.reset_lifetime(NEXT_WORLD), 1);
}

/// docs/spec/gates.md G6: a scope created after a reset never reuses the generation of the one
/// before, so the old token stays refused.
#[test]
fn generations_are_never_reused_after_a_reset() {
    let (mut gates, mut log) = registry();
    let first = gates.scope(PLAYER_STATE, WORLD);
    gates.reset_scope(PLAYER_STATE);
    gates.scope(OTHER_PAWN, WORLD);
    let second = gates.scope(PLAYER_STATE, WORLD);

    assert_ne!(first, second);
    assert!(second.generation() > first.generation());
    assert!(
        gates.set_ready(first, LIFECYCLE_FACT_PLAYER_STATE_TEAM_READY, true, &mut log).is_err()
    );
    assert!(!gates.is_ready_on(PLAYER_STATE, LIFECYCLE_FACT_PLAYER_STATE_TEAM_READY));
}

/// docs/spec/gates.md G10: `SetReady(Token, Tag, false)` closes a reversible fact in the same
/// generation.
#[test]
fn closing_a_fact_keeps_the_generation_and_blocks_later_waits() {
    let (mut gates, mut log) = registry();
    let player = gates.scope(PLAYER_STATE, WORLD);
    let widget = LIFECYCLE_FACT_UI_WIDGET_CONTROLLER_READY;
    gates.set_ready(player, widget, true, &mut log).unwrap();
    assert!(gates.set_ready(player, widget, false, &mut log).unwrap());
    assert!(!gates.clear(player, widget).unwrap(), "already closed");

    assert!(gates.is_current(player), "closing is not a reset");
    assert!(!gates.is_ready(req(player, widget)));
    let status = gates
        .wait_for_all(player, "Team.Presentation", &[req(player, widget)], &mut log, note("open"))
        .unwrap();
    assert_eq!(status, WaitStatus::Pending);
    gates.set_ready(player, widget, true, &mut log).unwrap();
    assert_eq!(log, ["open"], "reopened in the same generation");
}

/// docs/spec/gates.md G1: `IsReady(Requirement)` and `IsReady(Object, Tag)`.
#[test]
fn readiness_is_queried_by_requirement_and_by_object() {
    let (mut gates, mut log) = registry();
    let old = gates.scope(PAWN, WORLD);
    gates.set_ready(old, LIFECYCLE_FACT_CHARACTER_PRESENTATION_READY, true, &mut log).unwrap();
    assert!(gates.is_ready(req(old, LIFECYCLE_FACT_CHARACTER_PRESENTATION_READY)));
    assert!(!gates.is_ready(req(old, LIFECYCLE_FACT_CHARACTER_INIT_GATE_OPENED)));

    gates.reset_scope(PAWN);
    let new = gates.scope(PAWN, WORLD);
    gates.set_ready(new, LIFECYCLE_FACT_CHARACTER_PRESENTATION_READY, true, &mut log).unwrap();
    assert!(
        !gates.is_ready(req(old, LIFECYCLE_FACT_CHARACTER_PRESENTATION_READY)),
        "a requirement of an old generation never holds"
    );
    assert!(gates.is_ready(req(new, LIFECYCLE_FACT_CHARACTER_PRESENTATION_READY)));
    assert!(gates.is_ready_on(PAWN, LIFECYCLE_FACT_CHARACTER_PRESENTATION_READY));
    assert!(!gates.is_ready_on(OTHER_PAWN, LIFECYCLE_FACT_CHARACTER_PRESENTATION_READY));
}

/// docs/spec/gates.md G6: a wait is accepted only when the owner and every requirement token are
/// current; a refusal says what was expected and what arrived, and changes nothing.
#[test]
fn waits_with_stale_tokens_are_refused_and_change_nothing() {
    let (mut gates, mut log) = registry();
    let stale_owner = gates.scope(PAWN, WORLD);
    gates.reset_scope(PAWN);
    let player = gates.scope(PLAYER_STATE, WORLD);
    let team = [req(player, LIFECYCLE_FACT_PLAYER_STATE_TEAM_READY)];
    gates.wait_for_all(player, "Team.Presentation", &team, &mut log, note("pending")).unwrap();

    let error =
        gates.wait_for_all(stale_owner, "Feature", &team, &mut log, note("never")).unwrap_err();
    assert_eq!(
        error,
        LifecycleError::StaleOwner { request: "Feature".into(), token: stale_owner, current: None }
    );
    assert_eq!(
        error.to_string(),
        format!(
            "wait 'Feature' refused: expected the current scope of owner object#20, \
             which is no scope at all, got {stale_owner}"
        )
    );

    let error = gates
        .wait_for_all(
            player,
            "Team.Presentation",
            &[team[0], req(stale_owner, LIFECYCLE_FACT_CHARACTER_BEGIN_PLAY_READY)],
            &mut log,
            note("never"),
        )
        .unwrap_err();
    assert!(
        matches!(error, LifecycleError::StaleRequirement { token, .. } if token == stale_owner)
    );
    assert!(
        error.to_string().starts_with("wait 'Team.Presentation' refused: requirement"),
        "{error}"
    );
    assert_eq!(gates.counters().stale_rejections, 2);

    gates.set_ready(player, LIFECYCLE_FACT_PLAYER_STATE_TEAM_READY, true, &mut log).unwrap();
    assert_eq!(log, ["pending"], "a refused registration did not replace the pending one");
}

/// docs/spec/gates.md G2: an empty AND-set is refused rather than opened at once.
#[test]
fn a_wait_without_requirements_is_refused() {
    let (mut gates, mut log) = registry();
    let local_player = gates.scope(LOCAL_PLAYER, WORLD);
    let error = gates
        .wait_for_all(local_player, "Remote.Viewers", &[], &mut log, note("opened"))
        .unwrap_err();
    assert_eq!(
        error,
        LifecycleError::NoRequirements { request: "Remote.Viewers".into(), owner: LOCAL_PLAYER }
    );
    assert!(error.to_string().contains("expected at least one requirement"));
    assert!(log.is_empty());
}

/// docs/spec/gates.md G10: publishing wakes only the waits that reference the fact on that object,
/// however many others are pending.
#[test]
fn publishing_examines_only_waits_that_reference_the_fact() {
    let (mut gates, mut log) = registry();
    for raw in 1_000..2_000 {
        let object = ObjectId::new(raw);
        let token = gates.scope(object, WORLD);
        gates
            .wait_for_all(
                token,
                "Unrelated",
                &[req(token, LIFECYCLE_FACT_CHARACTER_BEGIN_PLAY_READY)],
                &mut log,
                note("unrelated"),
            )
            .unwrap();
    }
    let pawn = gates.scope(PAWN, WORLD);
    gates
        .wait_for_all(
            pawn,
            "Related",
            &[req(pawn, LIFECYCLE_FACT_CHARACTER_BEGIN_PLAY_READY)],
            &mut log,
            note("related"),
        )
        .unwrap();

    let before = gates.counters().examined;
    gates.set_ready(pawn, LIFECYCLE_FACT_CHARACTER_BEGIN_PLAY_READY, true, &mut log).unwrap();
    assert_eq!(gates.counters().examined - before, 1);
    assert_eq!(log, ["related"]);
    assert_eq!(gates.pending_wait_count(), 1_000);
}

/// docs/spec/gates.md G4: `Cancel(Owner, RequestName)` removes one pending request.
#[test]
fn cancel_removes_only_the_named_request_of_that_owner() {
    let (mut gates, mut log) = registry();
    let world = gates.scope(WORLD, WORLD);
    let pawn = gates.scope(PAWN, WORLD);
    let begin = [req(world, LIFECYCLE_FACT_WORLD_BEGIN_PLAY)];
    gates.wait_for_all(pawn, "Feature", &begin, &mut log, note("pawn")).unwrap();
    gates.wait_for_all(world, "Feature", &begin, &mut log, note("world")).unwrap();

    assert!(gates.cancel(PAWN, "Feature"));
    assert!(!gates.cancel(PAWN, "Feature"), "nothing left to cancel");
    assert!(!gates.cancel(OTHER_PAWN, "Feature"));
    gates.set_ready(world, LIFECYCLE_FACT_WORLD_BEGIN_PLAY, true, &mut log).unwrap();
    assert_eq!(log, ["world"]);
    assert_eq!(gates.counters().cancelled, 1);
}

/// docs/spec/gates.md G9: at the end of a run every pending wait can be listed with what blocks it,
/// in registration order, and the counts show no leak.
#[test]
fn pending_waits_are_listed_in_registration_order_with_their_blockers() {
    let (mut gates, mut log) = registry();
    let world = gates.scope(WORLD, WORLD);
    let player = gates.scope(PLAYER_STATE, WORLD);
    let remote = gates.scope(REMOTE_PLAYER_STATE, WORLD);
    let widget = gates.scope(WIDGET, WORLD);
    gates.set_ready(world, LIFECYCLE_FACT_LOCAL_PLAYER_TEAM_READY, true, &mut log).unwrap();
    gates
        .wait_for_all(
            player,
            "Gate.WidgetTeam",
            &[
                req(world, LIFECYCLE_FACT_LOCAL_PLAYER_TEAM_READY),
                req(player, LIFECYCLE_FACT_UI_WIDGET_CONTROLLER_READY),
            ],
            &mut log,
            note("local"),
        )
        .unwrap();
    gates
        .wait_for_all_guarded(
            remote,
            "Team.Presentation",
            widget,
            &[req(remote, LIFECYCLE_FACT_TEAM_ASSIGNMENT_READY)],
            &mut log,
            note("remote"),
        )
        .unwrap();

    let pending: Vec<_> = gates.pending_waits().collect();
    assert_eq!(pending.len(), 2);
    assert_eq!(pending[0].owner, player);
    assert_eq!(pending[0].request.as_str(), "Gate.WidgetTeam");
    assert_eq!(pending[0].requirements.len(), 2);
    assert_eq!(pending[0].blocking, [req(player, LIFECYCLE_FACT_UI_WIDGET_CONTROLLER_READY)]);
    assert_eq!(pending[1].guard, Some(widget));
    assert_eq!(
        pending[1].to_string(),
        format!(
            "wait 'Team.Presentation' of {remote} guarded by {widget} blocked on \
             Lifecycle.Fact.Team.AssignmentReady on {remote}"
        )
    );

    assert_eq!(gates.reset_lifetime(WORLD), 4);
    assert_eq!((gates.pending_wait_count(), gates.scope_count()), (0, 0));
    assert_eq!(gates.pending_waits().count(), 0);
}
