//! Per-player death respawn (docs/spec/transitions.md T13, T14), and what a respawn must not
//! keep or give again: death, the effect that killed, a second kit grant (T16).
//!
//! A `Symptom "…"` is what a player would see if the guard broke, as the table in
//! docs/spec/transitions.md ("Symptoms") names it.

use std::time::Duration;

use gatehouse_protocol::{ClientMessage, ErrorCode, ServerMessage};
use gatehouse_tags::catalog::{
    EFFECT_DAMAGE_OVER_TIME_BURN, EFFECT_DAMAGE_OVER_TIME_POISON, EFFECT_EQUIPMENT_ARMOR,
    STATE_DEAD,
};

use super::*;
use crate::model::{PlayerSave, Preset};

fn restart(h: &mut Harness, c: ConnectionId) {
    h.send(c, ClientMessage::RestartRequest);
}

/// Symptom "Restart stays spammable": the restart is gated on `State.Dead`.
#[test]
fn restart_without_state_dead_is_rejected() {
    let mut h = Harness::booted();
    let a = h.placed("a");
    let pawn = h.possessed(a);
    restart(&mut h, a);
    assert!(
        h.received(a)
            .iter()
            .any(|m| matches!(m, ServerMessage::Error { code: ErrorCode::RestartRejected, .. }))
    );
    assert_eq!(h.possessed(a), pawn, "nothing was unpossessed or spawned");
    assert_eq!(h.game.counters().respawns, 0);
}

/// Symptom "Respawned player takes no damage": `ResetForRespawn` removes `State.Dead`, and it
/// is the only place that does.
#[test]
fn a_respawn_clears_state_dead() {
    let mut h = Harness::booted();
    let a = h.placed("a");
    h.kill("a");
    assert!(h.player("a").is_dead());
    restart(&mut h, a);
    assert!(!h.player("a").is_dead());
    assert!(!h.player("a").abilities.tags().contains(&STATE_DEAD));
    assert_eq!(h.game.counters().respawns, 1);
    // And the respawned player takes damage again (a dead one is immune).
    let now = h.now;
    let mut player = h.game.roster.player_mut(&pid("a")).unwrap();
    player.abilities.apply(crate::abilities::ActiveEffect {
        tag: gatehouse_tags::catalog::EFFECT_DAMAGE_OVER_TIME_POISON,
        duration: crate::abilities::EffectDuration::Finite {
            expires: now + Duration::from_millis(100),
            next_tick: now + Duration::from_millis(50),
            tick: Duration::from_millis(50),
            damage: 30,
        },
    });
    drop(player);
    h.game.rearm_effects_timer();
    h.advance(Duration::from_millis(100));
    assert_eq!(h.player("a").abilities.health(), 40, "two ticks of 30 landed");
}

/// Symptom "A DoT keeps ticking after respawn": finite effects are stripped; infinite ones
/// (equipment) survive by design.
#[test]
fn a_respawn_strips_finite_effects_and_keeps_infinite_ones() {
    let mut h = Harness::holding_loads(WORLD);
    h.answer_session(LoadOutcome::NotFound);
    h.stream_node("harbor");
    let a = h.joined("a");
    h.answer_load(
        "a",
        LoadOutcome::Found(PlayerSave {
            player: pid("a"),
            node: None,
            preset: Preset::ReadOnly { name: "Vanguard".into() },
            inventory: vec![],
            equipment: vec![EFFECT_EQUIPMENT_ARMOR],
            version: 4,
            handoff: None,
            holder: None,
        }),
    );
    h.ack(a);
    h.kill("a");
    assert!(
        h.player("a").abilities.has_effect(EFFECT_DAMAGE_OVER_TIME_BURN),
        "the DoT outlives the death"
    );
    restart(&mut h, a);
    h.ack(a);
    let abilities = &h.player("a").abilities;
    assert!(abilities.has_effect(EFFECT_EQUIPMENT_ARMOR), "equipment survives by design");
    assert!(!abilities.has_effect(EFFECT_DAMAGE_OVER_TIME_BURN), "the DoT is stripped");
    assert_eq!(abilities.health(), 100);
    h.advance(Duration::from_secs(1));
    assert_eq!(h.player("a").abilities.health(), 100, "nothing ticks on the fresh pawn");
    assert!(!h.player("a").is_dead(), "the respawned player is not killed again by the old DoT");
}

/// T13: `ResetForRespawn` runs before UnPossess, so the respawned pawn is possessed by an
/// ability system already cleared of death state.
#[test]
fn reset_for_respawn_runs_before_unpossess() {
    let mut h = Harness::booted();
    let a = h.placed("a");
    let dead = h.possessed(a).unwrap();
    h.kill("a");
    let from = h.log.len();
    restart(&mut h, a);
    let after = &h.log[from..];
    let cleared = after.iter().position(|o| matches!(o, Output::Broadcast { message: ServerMessage::AbilityTagsChanged { tags, .. } } if !tags.contains(&STATE_DEAD)));
    let unpossessed = after.iter().position(|o| matches!(o, Output::Send { message: ServerMessage::Unpossessed { pawn_id }, .. } if *pawn_id == dead));
    assert!(cleared.is_some() && unpossessed.is_some());
    assert!(cleared < unpossessed);
}

/// T13: the dead pawn is destroyed last, after the new one exists.
#[test]
fn the_dead_pawn_is_destroyed_after_the_new_pawn_exists() {
    let mut h = Harness::booted();
    let a = h.placed("a");
    let dead = h.possessed(a).unwrap();
    h.kill("a");
    restart(&mut h, a);
    let fresh = h.possessed(a).unwrap();
    assert_ne!(fresh, dead);
    let spawned = h.position(|o| matches!(o, Output::Broadcast { message: ServerMessage::PawnSpawned(v) } if v.pawn_id == fresh));
    let destroyed = h.position(|o| matches!(o, Output::Broadcast { message: ServerMessage::PawnDestroyed { pawn_id } } if *pawn_id == dead));
    assert!(spawned.is_some() && destroyed.is_some());
    assert!(spawned < destroyed);
    assert_eq!(h.pawns_of("a"), 1);
}

/// T13: the respawn deliberately bypasses the transition and its settle-hold.
#[test]
fn a_respawn_needs_no_transition_and_no_loading_screen() {
    let mut h = Harness::booted();
    let a = h.placed("a");
    h.kill("a");
    let from = h.log.len();
    restart(&mut h, a);
    assert!(h.game.transition_id().is_none());
    assert!(!h.log[from..].iter().any(|o| matches!(
        o,
        Output::Broadcast { message: ServerMessage::FreezeCharacters { .. } }
    )));
}

/// T14: `RestartPlayer` has no retry of its own, so when the restart is refused (here: the node's
/// spawn points are not registered), the request goes through the spawn manager, whose retry places
/// the player; the dead pawn lingers until then.
#[test]
fn a_refused_respawn_is_queued_through_the_spawn_manager_and_retried() {
    let mut h = Harness::booted();
    let a = h.placed("a");
    let dead = h.possessed(a).unwrap();
    h.kill("a");
    h.game.streaming.forget_spawn_points();
    restart(&mut h, a);
    let pending = h.game.snapshot().pending_spawns;
    assert_eq!(pending.len(), 1);
    assert_eq!(
        (pending[0].kind, pending[0].node.clone()),
        (crate::SpawnKind::LateJoin, node("harbor"))
    );
    assert!(h.game.roster.pawn(dead).is_some(), "the dead pawn stays until its replacement exists");
    let load = h.game.streaming.streamed_load().unwrap();
    h.input(Input::SpawnPointsRegistered { load });
    h.advance(Duration::from_millis(100));
    let fresh = h.possessed(a).unwrap();
    assert_ne!(fresh, dead);
    assert!(h.game.roster.pawn(dead).is_none());
}

/// Symptom "Double ability grants ... or a respawn re-granting": the latches live on the
/// persistent player state.
#[test]
fn a_respawn_never_re_grants_kits() {
    let mut h = Harness::booted();
    let a = h.placed("a");
    let grants = |h: &Harness| {
        h.received(a).iter().filter(|m| matches!(m, ServerMessage::KitsGranted { .. })).count()
    };
    let before = grants(&h);
    assert!(before >= 1);
    h.kill("a");
    restart(&mut h, a);
    assert_eq!(grants(&h), before);
}

/// Symptom "HUD and input dead after respawn": the new pawn is possessed for the owner and the
/// player counts as placed only once the client acknowledged it.
#[test]
fn after_a_respawn_the_player_is_placed_only_once_the_new_pawn_is_acknowledged() {
    let mut h = Harness::booted();
    let a = h.placed("a");
    h.kill("a");
    restart(&mut h, a);
    assert!(!h.player("a").is_placed());
    h.ack(a);
    assert!(h.player("a").is_placed());
}

/// A hazard afflicts the living pawns on its node with its finite effect, and they die at 0
/// health: `State.Dead` is replicated and the pawn marked dead.
#[test]
fn a_hazard_kills_players_on_its_node() {
    let world = with_hazard(WORLD, HARBOR_POISON);
    let mut h = Harness::with(&world, rules());
    h.stream_node("harbor");
    let a = h.placed("a");
    let pawn = h.possessed(a).unwrap();
    h.advance(Duration::from_millis(700));
    assert!(h.player("a").is_dead());
    assert!(h.broadcasts().contains(&ServerMessage::PawnDied { pawn_id: pawn }));
    assert_eq!(h.game.counters().deaths, 1);
    let tag_changes: Vec<ServerMessage> = h
        .broadcasts()
        .into_iter()
        .filter(|m| matches!(m, ServerMessage::AbilityTagsChanged { .. }))
        .collect();
    assert_eq!(
        tag_changes.last(),
        Some(&ServerMessage::AbilityTagsChanged {
            player_id: pid("a"),
            tags: vec![EFFECT_DAMAGE_OVER_TIME_POISON, STATE_DEAD]
        }),
        "State.Dead replicated with the effect that killed"
    );
    assert_eq!(tag_changes.len(), 2, "the affliction and the death; a tick changes no tag");
    restart(&mut h, a);
    h.ack(a);
    assert!(!h.player("a").is_dead());
}

/// A hazard exposes when its own period comes, not whenever the effects timer wakes for
/// something else (here another effect's ticks, every 10 ms).
#[test]
fn a_hazard_exposes_at_its_period_not_when_another_effect_ticks() {
    let world = with_hazard(WORLD, HARBOR_POISON);
    let mut h = Harness::with(&world, rules());
    h.stream_node("harbor");
    h.placed("a");
    let (tick, lasts) = (Duration::from_millis(10), Duration::from_millis(200));
    h.afflict("a", EFFECT_DAMAGE_OVER_TIME_BURN, tick, 1, lasts);
    h.advance(Duration::from_millis(450));
    assert!(!h.player("a").abilities.has_effect(EFFECT_DAMAGE_OVER_TIME_POISON), "not yet due");
    h.advance(Duration::from_millis(100));
    assert!(h.player("a").abilities.has_effect(EFFECT_DAMAGE_OVER_TIME_POISON), "due at 500 ms");
}

/// A hazard afflicts living pawns only: a restarted player whose respawn was refused (no spawn
/// points) still stands behind its dead pawn, and is passed over until the new pawn exists.
#[test]
fn a_hazard_passes_over_a_restarted_player_whose_pawn_is_still_the_dead_one() {
    let hazard = HARBOR_POISON.replace("exposure_ms = 500", "exposure_ms = 100");
    let mut h = Harness::with(&with_hazard(WORLD, &hazard), rules());
    h.stream_node("harbor");
    let a = h.placed("a");
    h.kill("a");
    h.game.streaming.forget_spawn_points();
    restart(&mut h, a);
    assert!(!h.player("a").is_dead(), "reset for its respawn");
    h.advance(Duration::from_millis(350));
    assert!(!h.player("a").abilities.has_effect(EFFECT_DAMAGE_OVER_TIME_POISON));
}

/// A hazard passes over a player who already carries its effect: exposures do not stack.
#[test]
fn a_hazard_does_not_afflict_a_player_who_already_carries_its_effect() {
    let hazard = HARBOR_POISON
        .replace("damage_per_tick = 50", "damage_per_tick = 1")
        .replace("duration_ms = 300", "duration_ms = 1000")
        .replace("exposure_ms = 500", "exposure_ms = 100");
    let mut h = Harness::with(&with_hazard(WORLD, &hazard), rules());
    h.stream_node("harbor");
    h.placed("a");
    h.advance(Duration::from_millis(550));
    assert_eq!(
        h.player("a").abilities.health(),
        96,
        "one effect, applied at 100 ms, ticking at 200 to 500 ms; not one more per exposure"
    );
}

/// T6 and T13: a respawn asked for while a transition waits for its clients does not spawn
/// outside the spawn window, even for a client that already streamed the destination: the
/// request waits in the queue, and the new pawn comes on the destination once the transition
/// reaches Completing.
#[test]
fn a_respawn_during_a_transition_waits_for_its_spawn_window() {
    let mut h = Harness::booted();
    let (a, b) = (h.placed("a"), h.placed("b"));
    let dead = h.possessed(a);
    h.kill("a");
    h.input(Input::Travel { node: node("forest") });
    h.stream_node("forest");
    h.ready(a);
    restart(&mut h, a);
    assert!(!h.player("a").is_dead(), "ResetForRespawn ran at once");
    assert_eq!(h.possessed(a), dead, "no pawn outside the spawn window");
    assert!(h.game.spawns.has_request_for(&pid("a")), "the respawn waits in the queue");
    h.ready(b);
    let pawn = h.possessed(a).expect("a new pawn in the spawn window");
    assert_ne!(Some(pawn), dead);
    assert_eq!(h.game.roster.pawn(pawn).map(|p| p.node.clone()), Some(node("forest")));
}

/// T8 and T13: a respawn outside a transition's spawn window excuses nothing. A player who
/// respawned and has not acknowledged its new pawn when a transition opens its window is waited
/// for like any other unplaced player.
#[test]
fn a_respawn_outside_the_spawn_window_leaves_the_player_awaited() {
    let mut h = Harness::booted();
    let (a, b) = (h.placed("a"), h.placed("b"));
    h.kill("a");
    restart(&mut h, a);
    let respawned = h.possessed(a).expect("a new pawn at once: no transition in flight");
    h.input(Input::Travel { node: node("forest") });
    let t = h.transition();
    h.stream_node("forest");
    h.ready(a);
    h.ready(b);
    assert!(!h.ended(t), "a's new pawn is not acknowledged yet");
    h.send(a, ClientMessage::PossessionAcknowledged { pawn_id: respawned });
    assert!(h.ended(t));
}
