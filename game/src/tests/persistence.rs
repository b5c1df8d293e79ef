//! The kit latch in both orders (docs/spec/transitions.md T15) and the persistence flow: preset
//! resolution, failed loads, saves, the session's node.

use gatehouse_protocol::{ClientMessage, ServerMessage};
use gatehouse_tags::GameplayTag;
use gatehouse_tags::catalog::{KIT_COMPOSED_VANGUARD, KIT_STARTUP_MOVEMENT};

use super::*;
use crate::model::{PlayerSave, Preset, SessionSave};

fn save(player: &str, preset: Preset) -> PlayerSave {
    PlayerSave {
        player: pid(player),
        node: None,
        preset,
        inventory: vec![],
        equipment: vec![],
        version: 7,
        handoff: None,
        holder: None,
    }
}

fn vanguard() -> Preset {
    Preset::ReadOnly { name: "Vanguard".into() }
}

fn kits(h: &Harness, c: ConnectionId) -> Vec<Vec<GameplayTag>> {
    h.received(c)
        .into_iter()
        .filter_map(|m| match m {
            ServerMessage::KitsGranted { kits } => Some(kits),
            _ => None,
        })
        .collect()
}

/// Every player save in the log, single or batched, in order.
fn saved(h: &Harness) -> Vec<PlayerSave> {
    h.log
        .iter()
        .flat_map(|o| match o {
            Output::SavePlayer(s) => vec![s.clone()],
            Output::SavePlayers(saves) => saves.clone(),
            _ => Vec::new(),
        })
        .collect()
}

/// Logs `name` in, answers its save load (a Vanguard) and disconnects it: a player whose class
/// was known, gone, its state kept for a relaunch.
fn loaded_and_left(h: &mut Harness, name: &str) {
    let c = h.login(name);
    h.answer_load(name, LoadOutcome::Found(save(name, vanguard())));
    h.disconnect(c);
}

/// A harness booted at harbor with loads held.
fn booted_holding() -> Harness {
    let mut h = Harness::holding_loads(WORLD);
    h.answer_session(LoadOutcome::NotFound);
    h.stream_node("harbor");
    h
}

/// No pawn class is known before the save loads, so no pawn spawns before it.
#[test]
fn a_player_is_not_spawned_before_its_character_def_is_known() {
    let mut h = booted_holding();
    let a = h.joined("a");
    assert!(h.possessed(a).is_none());
    h.answer_load("a", LoadOutcome::Found(save("a", vanguard())));
    assert!(h.possessed(a).is_some(), "the load completion retried the spawn");
}

/// T15, dedicated-server join: the preset resolves first; possession performs the grant,
/// once, with the startup kits.
#[test]
fn kits_are_granted_once_at_possession_when_the_preset_resolved_first() {
    let mut h = booted_holding();
    let a = h.joined("a");
    h.answer_load("a", LoadOutcome::Found(save("a", vanguard())));
    assert_eq!(kits(&h, a), vec![vec![KIT_STARTUP_MOVEMENT, KIT_COMPOSED_VANGUARD]]);
    assert_eq!(h.game.counters().kit_grants, 1);
}

/// T15, PlayPreset relaunch: possession runs first with no preset (the relaunch remembers
/// its class); the provider performs the composed grant once the preset resolves.
#[test]
fn kits_are_granted_once_at_preset_resolution_when_possession_came_first() {
    let mut h = booted_holding();
    // The first session resolves the class but never possesses (it leaves during its join).
    loaded_and_left(&mut h, "a");
    let a = h.joined("a");
    assert!(h.possessed(a).is_some(), "the relaunch spawned before its save reloaded");
    assert_eq!(kits(&h, a), vec![vec![KIT_STARTUP_MOVEMENT]], "no preset yet: startup kits only");
    h.answer_load("a", LoadOutcome::Found(save("a", vanguard())));
    assert_eq!(kits(&h, a), vec![vec![KIT_STARTUP_MOVEMENT], vec![KIT_COMPOSED_VANGUARD]]);
    assert_eq!(h.game.counters().kit_grants, 2, "each grant counted");
    h.ack(a);
    h.kill("a");
    h.send(a, ClientMessage::RestartRequest);
    assert_eq!(kits(&h, a).len(), 2, "the respawn re-grants nothing");
}

/// T15: a preset with zero kits still latches.
#[test]
fn a_preset_with_zero_kits_still_latches() {
    let mut h = booted_holding();
    let a = h.joined("a");
    h.answer_load("a", LoadOutcome::Found(save("a", Preset::ReadOnly { name: "Scout".into() })));
    assert_eq!(kits(&h, a), vec![vec![KIT_STARTUP_MOVEMENT]]);
    let mut player = h.game.roster.player_mut(&pid("a")).unwrap();
    assert!(player.abilities.initialize_provider(&[KIT_COMPOSED_VANGUARD]).is_empty(), "latched");
}

/// A load that fails leaves the player in a stated state: the default preset, playing, never
/// saved (the stored save is not overwritten with defaults).
#[test]
fn a_failed_load_plays_the_default_preset_and_is_never_saved() {
    let mut h = booted_holding();
    let a = h.joined("a");
    h.answer_load("a", LoadOutcome::Failed("timed out after 5 s".into()));
    assert!(h.possessed(a).is_some());
    assert_eq!(h.player("a").character_def.as_ref().map(|d| d.as_str()), Some("Vanguard"));
    h.disconnect(a);
    assert!(saved(&h).is_empty());
    assert_eq!(h.game.counters().load_failures, 1);
}

/// A load answer for an earlier login of the same player is stale and ignored.
#[test]
fn a_stale_load_answer_is_ignored() {
    let mut h = booted_holding();
    let first = h.joined("a");
    let (_, old_ticket) = h.loads[0].clone();
    h.disconnect(first);
    h.loads.clear();
    h.joined("a");
    h.input(Input::PlayerLoaded {
        player: pid("a"),
        ticket: old_ticket,
        outcome: LoadOutcome::NotFound,
    });
    assert!(h.player("a").preset.is_none(), "the stale answer resolved nothing");
    assert_eq!(h.game.counters().stale_ignored, 1);
}

/// Saves happen when a transition completes (with the new node) and when a player leaves.
#[test]
fn players_are_saved_when_a_transition_completes_and_when_they_leave() {
    let mut h = Harness::booted();
    let a = h.placed("a");
    h.input(Input::Travel { node: node("forest") });
    h.stream_node("forest");
    h.ready(a);
    let saved_nodes: Vec<_> = saved(&h).into_iter().map(|s| s.node).collect();
    assert_eq!(saved_nodes, vec![Some(node("forest"))]);
    assert!(h.log.contains(&Output::SaveSession { node: node("forest"), version: 0 }));
    h.disconnect(a);
    assert_eq!(h.game.counters().saves_requested, 2, "at the end of the travel, and leaving");
    let last = saved(&h).pop().unwrap();
    assert_eq!(
        (last.node, last.version),
        (Some(node("forest")), 0),
        "every save carries the loaded version"
    );
}

/// A transition's end saves its N players with one output (one store
/// request), not N; each player is still saved once, at the new node, and counted.
#[test]
fn a_transitions_end_saves_every_player_with_one_output() {
    const PLAYERS: usize = 12;
    let mut h = Harness::booted();
    let names: Vec<String> = (0..PLAYERS).map(|i| format!("p{i:02}")).collect();
    let connections: Vec<ConnectionId> = names.iter().map(|n| h.placed(n)).collect();
    let (log_before, requested_before) = (h.log.len(), h.game.counters().saves_requested);
    h.input(Input::Travel { node: node("forest") });
    h.stream_node("forest");
    for c in connections {
        h.ready(c);
    }
    let end = &h.log[log_before..];
    let batches: Vec<&Vec<PlayerSave>> = end
        .iter()
        .filter_map(|o| match o {
            Output::SavePlayers(saves) => Some(saves),
            _ => None,
        })
        .collect();
    assert_eq!(batches.len(), 1, "one batch for the transition's end");
    assert!(!end.iter().any(|o| matches!(o, Output::SavePlayer(_))), "no single saves");
    let mut players: Vec<String> = batches[0].iter().map(|s| s.player.to_string()).collect();
    players.sort();
    assert_eq!(players, names, "every player once");
    assert!(batches[0].iter().all(|s| s.node == Some(node("forest"))));
    assert_eq!(
        h.game.counters().saves_requested - requested_before,
        PLAYERS as u64,
        "each save of the batch counts"
    );
}

/// The shutdown drain saves every player and the session.
#[test]
fn the_shutdown_drain_saves_every_player_and_the_session() {
    let mut h = Harness::booted();
    h.placed("a");
    h.placed("b");
    h.game.drain();
    h.drain();
    let saved: Vec<_> = saved(&h).into_iter().map(|s| s.player).collect();
    assert_eq!(saved, vec![pid("a"), pid("b")]);
    assert!(h.log.contains(&Output::SaveSession { node: node("harbor"), version: 0 }));
}

/// A read-only preset resolves from the catalog and is saved as a reference only.
#[test]
fn a_read_only_preset_is_saved_as_a_reference() {
    let mut h = booted_holding();
    let a = h.joined("a");
    h.answer_load("a", LoadOutcome::Found(save("a", Preset::ReadOnly { name: "Scout".into() })));
    assert_eq!(h.player("a").character_def.as_ref().map(|d| d.as_str()), Some("Scout"));
    h.disconnect(a);
    let saved = saved(&h).into_iter().next().unwrap();
    assert_eq!(saved.preset, Preset::ReadOnly { name: "Scout".into() });
}

/// The session save restores the world's node before the boot travel resolves its destination.
#[test]
fn the_session_save_restores_the_worlds_node_before_the_boot_travel() {
    let mut h = Harness::holding_loads(WORLD);
    assert_eq!(h.game.snapshot().phase, "Freezing", "the boot travel waits for the session save");
    assert!(h.streams.is_empty());
    h.answer_session(LoadOutcome::Found(SessionSave {
        session: "main".into(),
        node: node("forest"),
        version: 2,
    }));
    assert_eq!(h.game.snapshot().transition_target, Some(node("forest")));
    assert!(h.streams.iter().any(|s| s.what == "node forest"));
    h.game.drain();
    h.drain();
    let sessions: Vec<&Output> =
        h.log.iter().filter(|o| matches!(o, Output::SaveSession { .. })).collect();
    assert_eq!(
        sessions,
        [&Output::SaveSession { node: node("forest"), version: 2 }],
        "saved once, with the version it loaded"
    );
}

/// A resolved load replicates only what changed (else admitting N players sends about 3N² frames).
/// A save without equipment leaves the ability tags as clients know them: no `AbilityTagsChanged`;
/// the class it resolves is a player-state change: one `PlayerStateUpdated`. A save with equipment
/// changes the tags: they are replicated.
#[test]
fn a_resolved_load_replicates_only_what_changed() {
    let count =
        |h: &Harness, f: fn(&ServerMessage) -> bool| h.broadcasts().iter().filter(|m| f(m)).count();
    let tags = |m: &ServerMessage| matches!(m, ServerMessage::AbilityTagsChanged { .. });
    let state = |m: &ServerMessage| matches!(m, ServerMessage::PlayerStateUpdated(_));
    let mut h = booted_holding();
    h.joined("a");
    let (tags_before, states_before) = (count(&h, tags), count(&h, state));
    h.answer_load("a", LoadOutcome::Found(save("a", vanguard())));
    assert_eq!(count(&h, tags), tags_before, "no equipment: the tags did not change");
    assert_eq!(count(&h, state), states_before + 1, "the class resolved");

    h.joined("b");
    let (tags_before, states_before) = (count(&h, tags), count(&h, state));
    let armoured = PlayerSave {
        equipment: vec![gatehouse_tags::catalog::EFFECT_EQUIPMENT_ARMOR],
        ..save("b", vanguard())
    };
    h.answer_load("b", LoadOutcome::Found(armoured));
    assert_eq!(count(&h, tags), tags_before + 1, "the armour's effect tag");
    assert_eq!(count(&h, state), states_before + 1);

    // A relaunch within the retention keeps its class: the reload changes nothing.
    let c = h.joined("c");
    h.answer_load("c", LoadOutcome::Found(save("c", vanguard())));
    h.disconnect(c);
    h.joined("c");
    let states_before = count(&h, state);
    h.answer_load("c", LoadOutcome::Found(save("c", vanguard())));
    assert_eq!(count(&h, state), states_before, "the kept class is the saved one");
}

/// Every broadcast that names player `name`, by message name, in order.
fn told_of(h: &Harness, name: &str) -> Vec<&'static str> {
    h.broadcasts()
        .into_iter()
        .filter(|m| match m {
            ServerMessage::PlayerStateUpdated(view) => view.player_id.as_str() == name,
            ServerMessage::PlayerLeft { player_id }
            | ServerMessage::AbilityTagsChanged { player_id, .. }
            | ServerMessage::HealthChanged { player_id, .. } => player_id.as_str() == name,
            _ => false,
        })
        .map(|m| m.name())
        .collect()
}

/// A new player is announced once, when its save loaded, with its team and class together
/// (docs/spec/sessions.md S13): nothing of it goes out at login.
#[test]
fn a_new_player_is_announced_once_its_save_loaded_in_one_player_state() {
    let mut h = booted_holding();
    h.login("a");
    assert!(told_of(&h, "a").is_empty(), "{:?}", told_of(&h, "a"));
    h.answer_load("a", LoadOutcome::Found(save("a", vanguard())));
    assert_eq!(told_of(&h, "a"), ["PlayerStateUpdated"]);
    let announced = h.broadcasts().into_iter().find_map(|m| match m {
        ServerMessage::PlayerStateUpdated(view) => Some(view),
        _ => None,
    });
    let view = announced.expect("the announcement");
    assert_eq!(view.team, Some(h.player("a").team));
    assert_eq!(view.character_def.map(|c| c.to_string()).as_deref(), Some("Vanguard"));
}

/// A player that leaves before its save loads was never announced, so its leaving is not
/// either; one that leaves after is announced, then leaves (both orders, S13).
#[test]
fn a_player_that_leaves_before_its_save_loads_is_never_announced() {
    let mut h = booted_holding();
    let a = h.login("a");
    h.disconnect(a);
    assert!(told_of(&h, "a").is_empty(), "{:?}", told_of(&h, "a"));

    loaded_and_left(&mut h, "b");
    assert_eq!(told_of(&h, "b"), ["PlayerStateUpdated", "PlayerLeft"]);
}

/// A relaunch that kept its class is announced at login, with its kept tags and health; one
/// whose first session left before its class was known is announced once its save loads, its
/// kept tags and health with it where they are not the defaults (S13).
#[test]
fn a_relaunch_is_announced_at_login_when_it_kept_its_class_and_at_its_load_otherwise() {
    let mut h = booted_holding();
    loaded_and_left(&mut h, "a");
    h.login("a");
    let relaunch = ["PlayerStateUpdated", "AbilityTagsChanged", "HealthChanged"];
    let first = ["PlayerStateUpdated", "PlayerLeft"];
    assert_eq!(told_of(&h, "a"), [&first[..], &relaunch[..]].concat());

    let b = h.login("b");
    h.disconnect(b);
    h.login("b");
    assert!(told_of(&h, "b").is_empty(), "{:?}", told_of(&h, "b"));
    // The first session's load is stale; the relaunch's announces it.
    h.answer_load("b", LoadOutcome::Found(save("b", vanguard())));
    assert!(told_of(&h, "b").is_empty(), "a stale load announces nothing");
    h.answer_load("b", LoadOutcome::Found(save("b", vanguard())));
    assert_eq!(told_of(&h, "b"), ["PlayerStateUpdated"]);
}

/// A failed session load is counted, the world starts at its start node, and the session is
/// never saved over the save it could not read.
#[test]
fn a_failed_session_load_is_counted_and_the_session_never_saved() {
    let mut h = Harness::holding_loads(WORLD);
    h.answer_session(LoadOutcome::Failed("disk on fire".into()));
    assert_eq!(h.game.counters().load_failures, 1);
    assert_eq!(h.game.snapshot().transition_target, Some(node("harbor")));
    h.game.drain();
    h.drain();
    assert!(!h.log.iter().any(|o| matches!(o, Output::SaveSession { .. })));
}

/// A player without a save gets a preset chosen by its id: the same id always gets the same
/// one (runs are reproducible), and ids spread over the catalog's presets and both kinds (a
/// saved character, a read-only preset). The table pins the choice: changing it reshuffles
/// every recorded run.
#[test]
fn a_new_players_preset_is_chosen_by_its_id_reproducibly() {
    let mut h = Harness::booted();
    let ids = ["a", "b", "c", "d", "e", "f"];
    for p in ids {
        h.login(p);
    }
    let chosen: Vec<String> = ids
        .iter()
        .map(|p| match &h.player(p).preset.as_ref().expect("resolved").source {
            Preset::Character { character_def, .. } => format!("character {character_def}"),
            Preset::ReadOnly { name } => format!("read-only {name}"),
        })
        .collect();
    assert_eq!(
        chosen,
        [
            "read-only Scout",
            "character Vanguard",
            "read-only Scout",
            "character Vanguard",
            "read-only Scout",
            "character Vanguard"
        ]
    );
}

/// T4 (the server travels only after persistence settles) against a stream of logins: the travel
/// waits for the player saves in flight when the transition started, and not for a save asked for
/// by a login during Freezing. At 200 logins/s some save was always loading, and the travel waited
/// until logins stopped (3.8 s at 2,000 clients).
#[test]
fn a_save_asked_for_after_the_transition_started_does_not_hold_the_travel() {
    let mut h = booted_holding();
    h.login("a");
    h.input(Input::Travel { node: node("forest") });
    assert_eq!(h.game.snapshot().phase, "Freezing", "a's save, in flight at the start, holds it");
    let b = h.login("b");
    h.answer_load("a", LoadOutcome::NotFound);
    assert_eq!(h.game.snapshot().phase, "Loading", "b's save, asked for later, does not");
    // b is still one the transition is for: shown it, and placed once its save is in.
    h.stream_node("forest");
    let t = h.transition();
    let shown = |m: &ServerMessage| matches!(m, ServerMessage::ShowTransition { transition_id, .. } if *transition_id == t);
    assert!(h.received(b).iter().any(shown), "b was shown the travel");
    let a = h.game.roster.connection_of(&pid("a")).expect("a is logged in");
    h.ready(a);
    h.ready(b);
    assert!(!h.ended(t), "b is not placed while its save loads");
    h.answer_load("b", LoadOutcome::NotFound);
    h.ack(a);
    h.ack(b);
    assert!(h.ended(t));
    assert!(h.player("b").is_placed());
}

/// Every save in flight at the start holds the travel, whichever settles first; a later
/// login's save settling does not release it early.
#[test]
fn the_saves_in_flight_at_the_start_hold_the_travel_whichever_settles_first() {
    for first in ["a", "c"] {
        let mut h = booted_holding();
        h.login("a");
        h.login("c");
        h.input(Input::Travel { node: node("forest") });
        h.login("b");
        h.answer_load("b", LoadOutcome::NotFound);
        assert_eq!(h.game.snapshot().phase, "Freezing", "a and c are still loading");
        h.answer_load(first, LoadOutcome::NotFound);
        assert_eq!(h.game.snapshot().phase, "Freezing", "{first} settled; the other has not");
        h.answer_load(if first == "a" { "c" } else { "a" }, LoadOutcome::NotFound);
        assert_eq!(h.game.snapshot().phase, "Loading", "both settled ({first} first)");
    }
}

/// A save in flight at the start whose player left no longer holds the travel, nor does the
/// new load of the same player logging in again (asked for after the start).
#[test]
fn a_save_whose_player_left_no_longer_holds_the_travel() {
    let mut h = booted_holding();
    let a = h.login("a");
    h.input(Input::Travel { node: node("forest") });
    assert_eq!(h.game.snapshot().phase, "Freezing");
    h.disconnect(a);
    assert_eq!(h.game.snapshot().phase, "Loading", "the load of a's first session is gone");
    // Logging in again while c's save still holds the travel: a's new save holds nothing.
    let mut h = booted_holding();
    let a = h.login("a");
    h.login("c");
    h.input(Input::Travel { node: node("forest") });
    h.disconnect(a);
    h.login("a");
    assert_eq!(h.game.snapshot().phase, "Freezing", "c's save holds the travel");
    h.answer_load("c", LoadOutcome::NotFound);
    assert_eq!(h.game.snapshot().phase, "Loading");
    assert!(h.loads.iter().any(|(p, _)| p.as_str() == "a"), "the relogin's save is loading");
}
