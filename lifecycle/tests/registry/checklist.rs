//! What every new fact or gate is tested for (docs/spec/gates.md G13), at registry level.

use gatehouse_lifecycle::{Registry, ScopeToken, WaitStatus};
use gatehouse_tags::GameplayTag;
use gatehouse_tags::catalog::*;

use crate::common::*;

/// The widget/team gate (docs/spec/gates.md G15): world-scoped local team plus the local player
/// state's widget controller, and (to make orders interesting) the player state's team processing.
fn widget_and_team(world: ScopeToken, player: ScopeToken) -> [(ScopeToken, GameplayTag); 3] {
    [
        (world, LIFECYCLE_FACT_LOCAL_PLAYER_TEAM_READY),
        (player, LIFECYCLE_FACT_UI_WIDGET_CONTROLLER_READY),
        (player, LIFECYCLE_FACT_PLAYER_STATE_TEAM_READY),
    ]
}

/// docs/spec/gates.md G3, for every new fact or gate: ready-before-register, with part of the set
/// cached.
#[test]
fn facts_cached_before_registration_count_toward_the_gate() {
    let (mut gates, mut log) = registry();
    let world = gates.scope(WORLD, WORLD);
    let player = gates.scope(PLAYER_STATE, WORLD);
    let facts = widget_and_team(world, player);
    for (token, fact) in &facts[..2] {
        gates.set_ready(*token, *fact, true, &mut log).unwrap();
    }
    let requirements = facts.map(|(token, fact)| req(token, fact));

    let status = gates
        .wait_for_all(player, "Gate.WidgetTeam", &requirements, &mut log, note("open"))
        .unwrap();
    assert_eq!(status, WaitStatus::Pending);
    assert_eq!(
        gates.blocking_facts(PLAYER_STATE, "Gate.WidgetTeam"),
        Some(vec![requirements[2]]),
        "only the fact not yet cached blocks"
    );
    gates.set_ready(player, LIFECYCLE_FACT_PLAYER_STATE_TEAM_READY, true, &mut log).unwrap();
    assert_eq!(log, ["open"]);
}

/// Every new fact or gate: both arrival orders (every order of three facts, with the registration
/// before, between and after them; docs/spec/gates.md G2).
#[test]
fn the_gate_opens_exactly_at_the_last_fact_in_every_arrival_order() {
    const ORDERS: [[usize; 3]; 6] =
        [[0, 1, 2], [0, 2, 1], [1, 0, 2], [1, 2, 0], [2, 0, 1], [2, 1, 0]];
    for order in ORDERS {
        for registered_after in 0..=3 {
            let (mut gates, mut log) = registry();
            let world = gates.scope(WORLD, WORLD);
            let player = gates.scope(PLAYER_STATE, WORLD);
            let facts = widget_and_team(world, player);
            let requirements = facts.map(|(token, fact)| req(token, fact));
            let register = |gates: &mut Registry<Log>, log: &mut Log| {
                gates
                    .wait_for_all(player, "Gate.WidgetTeam", &requirements, log, note("open"))
                    .unwrap()
            };
            for (published, &index) in order.iter().enumerate() {
                if published == registered_after {
                    assert_eq!(register(&mut gates, &mut log), WaitStatus::Pending);
                }
                assert!(log.is_empty(), "{order:?}/{registered_after}: opened early");
                let (token, fact) = facts[index];
                gates.set_ready(token, fact, true, &mut log).unwrap();
            }
            if registered_after == 3 {
                assert_eq!(register(&mut gates, &mut log), WaitStatus::Delivered);
            }
            assert_eq!(log, ["open"], "{order:?}, registered after {registered_after}");
        }
    }
}

/// docs/spec/gates.md G2 (a gate opens exactly once), for every new fact or gate: duplicate source
/// notifications.
#[test]
fn duplicate_source_notifications_wake_nothing_and_deliver_nothing_twice() {
    let (mut gates, mut log) = registry();
    let pawn = gates.scope(PAWN, WORLD);
    let requirements = [
        req(pawn, LIFECYCLE_FACT_CHARACTER_BEGIN_PLAY_READY),
        req(pawn, LIFECYCLE_FACT_CHARACTER_OWNING_CLIENT_POSSESSION_ACKNOWLEDGED),
    ];
    gates.wait_for_all(pawn, "Character.Local", &requirements, &mut log, note("open")).unwrap();

    let begin = LIFECYCLE_FACT_CHARACTER_BEGIN_PLAY_READY;
    assert!(gates.set_ready(pawn, begin, true, &mut log).unwrap());
    let examined = gates.counters().examined;
    assert!(
        !gates.set_ready(pawn, begin, true, &mut log).unwrap(),
        "a duplicate notification changes nothing"
    );
    assert_eq!(gates.counters().examined, examined, "and wakes no wait");
    assert!(log.is_empty());

    let ack = LIFECYCLE_FACT_CHARACTER_OWNING_CLIENT_POSSESSION_ACKNOWLEDGED;
    gates.set_ready(pawn, ack, true, &mut log).unwrap();
    gates.set_ready(pawn, ack, true, &mut log).unwrap();
    gates.set_ready(pawn, begin, true, &mut log).unwrap();
    assert_eq!(log, ["open"]);
}

/// Every new fact or gate: replacement generations (docs/spec/gates.md G6, G7).
#[test]
fn a_replacement_generation_starts_without_the_old_facts() {
    let (mut gates, mut log) = registry();
    let first = gates.scope(PAWN, WORLD);
    gates.set_ready(first, LIFECYCLE_FACT_CHARACTER_BEGIN_PLAY_READY, true, &mut log).unwrap();
    gates.set_ready(first, LIFECYCLE_FACT_CHARACTER_INIT_GATE_OPENED, true, &mut log).unwrap();

    gates.reset_scope(PAWN);
    let second = gates.scope(PAWN, WORLD);
    assert!(second.generation() > first.generation());
    assert!(!gates.is_ready_on(PAWN, LIFECYCLE_FACT_CHARACTER_BEGIN_PLAY_READY));

    let status = gates
        .wait_for_all(
            second,
            "Feature.Initialize",
            &[req(second, LIFECYCLE_FACT_CHARACTER_INIT_GATE_OPENED)],
            &mut log,
            note("second generation"),
        )
        .unwrap();
    assert_eq!(status, WaitStatus::Pending, "the old generation's fact does not count");
    gates.set_ready(second, LIFECYCLE_FACT_CHARACTER_INIT_GATE_OPENED, true, &mut log).unwrap();
    assert_eq!(log, ["second generation"]);
}

/// Every new fact or gate: world cleanup (docs/spec/gates.md G7) retires waits owned outside the
/// world that reference it, and nothing else of their owner.
#[test]
fn world_cleanup_retires_waits_that_reference_the_world_from_outside_it() {
    let (mut gates, mut log) = registry();
    let login = gates.scope(LOGIN, GAME_INSTANCE);
    let world = gates.scope(WORLD, WORLD);
    gates
        .wait_for_all(
            login,
            "World.Online",
            &[req(world, LIFECYCLE_FACT_WORLD_BEGIN_PLAY)],
            &mut log,
            note("world"),
        )
        .unwrap();
    gates
        .wait_for_all(
            login,
            "Login.Only",
            &[req(login, LIFECYCLE_FACT_NAKAMA_LOGIN_SUCCEEDED)],
            &mut log,
            note("login"),
        )
        .unwrap();

    gates.reset_lifetime(WORLD);
    assert!(!gates.is_pending(LOGIN, "World.Online"));
    assert!(gates.is_pending(LOGIN, "Login.Only"));

    gates.set_ready(login, LIFECYCLE_FACT_NAKAMA_LOGIN_SUCCEEDED, true, &mut log).unwrap();
    assert_eq!(log, ["login"]);
}
